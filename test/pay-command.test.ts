/**
 * `gate402 pay`, the buyer's command, run as a buyer runs it against the real gateway: `--dry-run` prints the offer
 * and pays nothing, `--max` refuses a higher price (exit 3) and pays nothing, and a call within `--max` pays; with
 * `--scheme batch-settlement` the first call deposits into a channel and the next ones pay with vouchers, their state
 * kept in a file between calls. Its start-up is the bundle's: no TypeScript is compiled and tsx is never loaded (what
 * made a call take ~2.8 s).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import type { PaymentRequirements } from '@x402/core/types';
import { buildChannelConfig, computeChannelId } from '@x402/evm/batch-settlement/client';
import { parseUnits, zeroHash } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { stablecoinArtifact } from '../src/devnet/contracts/artifacts/index.ts';
import { clientsFor, network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { startHostileUpstream } from './helpers/hostile-upstream.ts';
import { registerOwnMerchant, relayerTxCount, spawnPaidGateway } from './helpers/paid-gateway.ts';
import { stableBalance } from './helpers/payments.ts';
import { BIN } from './helpers/spawn-devnet.ts';
import { tempDir } from './helpers/temp-dir.ts';

const manifest = testDevnet();
const base = network(manifest, CAIP2.base);
const upstream = await startHostileUpstream();
t.teardown(() => upstream.close());
const { gw, relayers } = await spawnPaidGateway(manifest, upstream.origin);
t.teardown(() => gw.stop());
const { slug, payTo } = await registerOwnMerchant(gw.url, upstream.origin, { slug: `pay-${Date.now().toString(36)}`, priceUsd: '0.010000', networks: [CAIP2.base] });
const url = `${gw.url}/m/${slug}/data`;
const buyerKey = generatePrivateKey();
const buyer = privateKeyToAccount(buyerKey).address;
/** A second buyer, for a channel file of a chain that restarted. */
const restartedKey = generatePrivateKey();
const restarted = privateKeyToAccount(restartedKey).address;
{
  const { pub, wallet } = clientsFor(base, tester('payCommand'));
  for (const to of [buyer, restarted]) {
    await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: base.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'mint', args: [to, parseUnits('1', 6)] }) });
  }
}
const logs = tempDir('pay-command');
t.teardown(() => rmSync(logs, { recursive: true, force: true }));

/** `gate402 pay` as a buyer runs it; with `moduleLog`, every module it resolves is listed in that file. */
function pay(args: string[], moduleLog?: string, target = url, key = buyerKey): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [...(moduleLog ? ['--import', join(import.meta.dirname, 'fixtures/module-log.mjs')] : []), BIN, 'pay', target, '--network', CAIP2.base, '--manifest', TEST_MANIFEST_PATH, ...args],
    {
      env: { ...process.env, GATE402_BUYER_KEY: key, ...(moduleLog ? { GATE402_MODULE_LOG: moduleLog } : {}) },
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c));
  child.stderr.on('data', (c: Buffer) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr, ms: performance.now() - started })));
}

const money = async () => ({ buyer: await stableBalance(base, buyer), merchant: await stableBalance(base, payTo) });

t.test('--dry-run prints the offer it would pay and pays nothing', async (t) => {
  const before = await money();
  for (const protocol of ['x402', 'mpp']) {
    const run = await pay(['--dry-run', '--protocol', protocol]);
    t.equal(run.code, 0, run.stderr);
    t.match(run.stdout, new RegExp(`${protocol} offer: 0\\.010000 USD \\(10000 units of ${base.stablecoin.address} on ${CAIP2.base}\\) to ${payTo}`, 'i'));
    t.match(run.stdout, /dry run: nothing was paid/);
  }
  t.equal(upstream.callsTo(`/${slug}/data`), 0, 'the upstream was not called');
  t.same(await money(), before, 'no balance moved');
});

t.test('--max below the price refuses it (exit 3) and pays nothing; at the price it pays', async (t) => {
  const before = await money();
  const refused = await pay(['--max', '0.005']);
  t.equal(refused.code, 3);
  t.match(refused.stderr, 'the price 0.010000 USD is above --max 0.005 USD; nothing was paid');
  t.same(await money(), before, 'no balance moved');
  const bad = await pay(['--max', 'ten']);
  t.equal(bad.code, 2, 'a --max that is not an amount is a usage error');
  t.match(bad.stderr, /--max must be a USD amount/);
  const paid = await pay(['--max', '0.01']);
  t.equal(paid.code, 0, paid.stderr);
  t.match(paid.stdout, /^200 /);
  t.match(paid.stdout, /x402 settlement: \{"success":true/);
  const after = await money();
  t.same([before.buyer - after.buyer, after.merchant - before.merchant], [10_000n, 10_000n], 'paid once, the price');
});

t.test('--scheme batch-settlement: a deposit on the first call, vouchers after, the channel kept in a file', async (t) => {
  const joke = `${gw.url}/m/catjoke/joke`; // a built-in route that takes channels
  const state = join(logs, 'channels.json');
  const args = ['--scheme', 'batch-settlement', '--channels', state, '--deposit-multiplier', '4'];
  const before = await stableBalance(base, buyer);
  const calls = upstream.callsTo('/catjoke/joke');
  const first = await pay(args, undefined, joke);
  t.equal(first.code, 0, first.stderr);
  t.match(first.stdout, /^200 /);
  t.match(first.stdout, /x402 settlement: \{"success":true.*"transaction":"0x[0-9a-f]{64}".*"chargedCumulativeAmount":"10000"/, 'the first call deposits and is charged one price');
  t.equal(before - (await stableBalance(base, buyer)), 40_000n, "the buyer's deposit left its wallet: four prices");
  const sent = await relayerTxCount(base, relayers);
  for (const k of [2, 3]) {
    const next = await pay(args, undefined, joke);
    t.equal(next.code, 0, next.stderr);
    t.match(next.stdout, new RegExp(`"chargedCumulativeAmount":"${k * 10_000}"`), `call ${k} is a voucher for ${k} prices in all`);
  }
  t.equal(await relayerTxCount(base, relayers), sent, 'no transaction for the vouchers');
  t.equal(before - (await stableBalance(base, buyer)), 40_000n, 'nor any more money from the wallet');
  t.equal(upstream.callsTo('/catjoke/joke') - calls, 3, 'the upstream answered each call once');
  const kept = JSON.parse(readFileSync(state, 'utf8')) as Record<string, { chargedCumulativeAmount?: string }>;
  t.same(
    Object.values(kept).map((c) => c.chargedCumulativeAmount),
    ['30000'],
    'the file holds one channel, charged three prices',
  );
  const wrong = await pay(['--scheme', 'batch-settlement', '--protocol', 'mpp'], undefined, joke);
  t.equal(wrong.code, 2, 'an x402 scheme with MPP is a usage error');
  const small = await pay([...args.slice(0, -1), '2'], undefined, joke);
  t.equal(small.code, 2, 'a deposit of fewer than three prices is a usage error');
  t.match(small.stderr, /--deposit-multiplier must be a whole number from 3/);
});

t.test('--scheme batch-settlement: a kept channel the chain has never seen (a devnet restarted) is opened again', async (t) => {
  const joke = `${gw.url}/m/catjoke/joke`;
  // The file of a buyer whose chain restarted: it holds this channel with a deposit and charges the new chain lacks.
  const offer = (decodePaymentRequiredHeader((await fetch(joke)).headers.get('payment-required') ?? '').accepts as PaymentRequirements[]).find(
    (a) => a.scheme === 'batch-settlement' && a.network === CAIP2.base,
  );
  if (!offer) throw new Error('catjoke offers no channel on Base');
  const channelId = computeChannelId(buildChannelConfig({ signer: { address: restarted }, salt: zeroHash } as never, offer), offer.network).toLowerCase();
  const state = join(logs, 'restarted-channels.json');
  writeFileSync(state, JSON.stringify({ [channelId]: { chargedCumulativeAmount: '90000', balance: '100000', totalClaimed: '0' } }));
  const before = await stableBalance(base, restarted);
  const run = await pay(['--scheme', 'batch-settlement', '--channels', state, '--deposit-multiplier', '3'], undefined, joke, restartedKey);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /x402 settlement: \{"success":true.*"chargedCumulativeAmount":"10000"/, 'a new deposit, charged one price');
  t.equal(before - (await stableBalance(base, restarted)), 30_000n, 'the deposit left the wallet');
  const kept = JSON.parse(readFileSync(state, 'utf8')) as Record<string, { chargedCumulativeAmount?: string }>;
  t.equal(kept[channelId]?.chargedCumulativeAmount, '10000', 'the file now holds the channel the chain has');
});

t.test('start-up runs the bundle: no TypeScript compiled, tsx never loaded', async (t) => {
  await pay(['--dry-run']); // builds the bundle if the sources changed since the last one
  const log = join(logs, 'modules.log');
  const run = await pay(['--dry-run'], log);
  t.equal(run.code, 0, run.stderr);
  const loaded = readFileSync(log, 'utf8').trim().split('\n');
  t.same(
    loaded.filter((u) => u.includes('/node_modules/tsx/') || /\.ts$/.test(u)),
    [],
    'no tsx, no .ts module',
  );
  t.ok(
    loaded.some((u) => /\/gate402(-cache-[^/]+)?\/pay-node\d+-[0-9a-f]{32}\.mjs$/.test(u)),
    'the cached bundle ran',
  );
  t.ok(loaded.length < 40, `a few modules resolved, not hundreds (${loaded.length})`);
  t.comment(`gate402 pay --dry-run took ${Math.round(run.ms)} ms (wall, this machine, under the suite's load)`);
});
