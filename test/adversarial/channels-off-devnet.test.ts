/**
 * Payment channels off the devnet (networks from GATE402_NETWORKS_FILE, keys of the operator's own): the gateway starts
 * with them on its default margins and offers them (EIP-3009 deposits on Base, Permit2 on the stock chain); with a
 * margin that could not protect an accepted voucher it refuses to start, one line naming the setting, no port bound and
 * nothing written.
 */
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { registrationTypedData } from '../../src/gateway/merchants/signature.ts';
import { countingUpstream } from '../helpers/channel-buyer.ts';
import { freePort, freshAccount, testDevnet } from '../helpers/devnet.ts';
import { listening } from '../helpers/raw-http.ts';
import { BIN, offDevnetEnv } from '../helpers/spawn-devnet.ts';
import { tempDir } from '../helpers/temp-dir.ts';

const manifest = testDevnet();
const dir = tempDir('channels-off-devnet');
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const networksFile = join(dir, 'networks.json');
writeFileSync(networksFile, JSON.stringify({ networks: manifest.networks }));
const authorizer = generatePrivateKey();

/** Everything an operator must give off the devnet, keys of its own, and payment channels on. */
const own = (): Record<string, string> => ({
  GATE402_RELAYER_KEYS: generatePrivateKey(),
  GATE402_GATEWAY_KEY: generatePrivateKey(),
  GATE402_MPP_SECRET: 'an operator secret of well over thirty-two bytes',
  GATE402_STOCK_ENABLED: 'false',
  GATE402_NATIVE_USD_EIP155_8453: '1',
  GATE402_NATIVE_USD_EIP155_84532: '1',
  GATE402_NATIVE_USD_EIP155_4663: '1',
  GATE402_CHANNEL_AUTHORIZER_KEY: authorizer,
  GATE402_UPSTREAM_ALLOWLIST: '127.0.0.1',
});

/** A merchant whose one route takes payment channels, registered by its owner's signature (off the devnet there is no built-in catalog). */
async function registerChannelMerchant(gatewayUrl: string, upstreamOrigin: string): Promise<Response> {
  const owner = freshAccount();
  const registration = {
    action: 'register' as const,
    slug: 'channelshop',
    name: 'Channel shop',
    description: 'A merchant paid through payment channels',
    payTo: owner.address,
    networks: [CAIP2.base, CAIP2.stockChain],
    upstream: { kind: 'url' as const, baseUrl: `${upstreamOrigin}/channelshop`, secretHeaders: {} },
    routes: [{ route: 'data', methods: ['GET' as const], priceUsd: '0.010000', summary: 'Data', description: 'Paid data', input: 'nothing', batchSettlement: true }],
    nonce: `n-${Math.random()}`,
    issuedAt: Math.floor(Date.now() / 1000),
  };
  const signature = await owner.signTypedData(registrationTypedData(registration as never));
  return fetch(`${gatewayUrl}/api/merchants`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ registration, signature }) });
}

/** `gate402 gateway` off the devnet with exactly `settings`: the child, its port and data directory. */
async function start(settings: Record<string, string>) {
  const port = await freePort();
  const dataDir = join(mkdtempSync(join(dir, 'run-')), 'data');
  const env = offDevnetEnv({ GATE402_NETWORKS_FILE: networksFile, GATE402_DATA_DIR: dataDir, GATE402_GATEWAY_PORT: String(port), GATE402_LOG_LEVEL: 'warn', ...settings });
  const child = spawn(process.execPath, [BIN, 'gateway'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  child.stdout.resume();
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, port, dataDir, exited, stderr: () => stderr };
}

async function refused(t: Test, settings: Record<string, string>, variable: string): Promise<void> {
  const run = await start(settings);
  const timer = setTimeout(() => run.child.kill('SIGKILL'), 60_000);
  const code = await run.exited;
  clearTimeout(timer);
  const lines = run
    .stderr()
    .split('\n')
    .filter((l) => l.trim() !== '');
  t.not(code, 0, `exits non-zero (${code})`);
  t.equal(lines.length, 1, `one line on stderr: ${JSON.stringify(run.stderr())}`);
  t.match(lines[0] ?? '', variable, `the line names ${variable}`);
  t.notOk(await listening(run.port), 'no port is listening');
  t.notOk(existsSync(run.dataDir), 'no store was opened');
}

t.test('off the devnet, channels on the default margins: the gateway starts and offers them', async (t) => {
  const run = await start(own());
  t.teardown(() => {
    if (run.child.exitCode === null) run.child.kill('SIGKILL');
  });
  const upstream = await countingUpstream();
  t.teardown(() => upstream.close());
  const base = `http://127.0.0.1:${run.port}`;
  let up = false;
  const deadline = Date.now() + 90_000;
  while (!up && run.child.exitCode === null && Date.now() < deadline) {
    up = await fetch(`${base}/health`).then(
      (r) => r.status < 500,
      () => false,
    );
    if (!up) await new Promise((r) => setTimeout(r, 250));
  }
  t.ok(up, `the gateway started (stderr: ${run.stderr().slice(0, 400)})`);
  const registered = await registerChannelMerchant(base, upstream.origin);
  t.ok(registered.status === 200 || registered.status === 201, `a merchant registered: ${registered.status} ${await registered.text()}`);
  const answer = await fetch(`${base}/m/channelshop/data`);
  t.equal(answer.status, 402, 'its route asks for payment');
  const accepts = decodePaymentRequiredHeader(answer?.headers.get('payment-required') as string).accepts;
  const channels = accepts.filter((a) => a.scheme === 'batch-settlement');
  const on = (network: string) => channels.find((a) => a.network === network)?.extra as { receiverAuthorizer?: string; withdrawDelay?: number; assetTransferMethod?: string } | undefined;
  for (const [network, method] of [
    [CAIP2.base, 'eip3009'],
    [CAIP2.stockChain, 'permit2'],
  ] as const) {
    t.equal(on(network)?.receiverAuthorizer, privateKeyToAccount(authorizer).address, `${network}: a channel offer naming the operator's authorizer`);
    t.equal(on(network)?.assetTransferMethod ?? 'eip3009', method, `${network}: deposits by ${method} (EIP-3009 is the scheme's default, left unnamed)`);
    t.equal(on(network)?.withdrawDelay, 86_400, `${network}: the default withdraw delay (a day, four times the default margin)`);
  }
  t.equal(accepts[0]?.scheme, 'exact', 'exact is still offered first');
  run.child.kill('SIGTERM');
  await run.exited;
});

t.test('off the devnet, margins that could not protect an accepted voucher stop the start', async (t) => {
  const margin = 'GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS';
  await refused(t, { ...own(), [margin]: '300' }, margin); // the devnet's five minutes: too short for an outage
  await refused(t, { ...own(), [margin]: '7200', GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS: '10800' }, margin); // over half the delay
  await refused(t, { ...own(), GATE402_CHANNEL_GAS_HEADROOM: '1' }, 'GATE402_CHANNEL_GAS_HEADROOM');
  await refused(t, { ...own(), GATE402_CHANNEL_CLAIM_STALL_SECONDS: '7200' }, 'GATE402_CHANNEL_CLAIM_STALL_SECONDS');
  await refused(t, { ...own(), GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS: '600' }, 'GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS'); // below the scheme's 900
  await refused(t, { ...own(), GATE402_CHANNEL_AUTHORIZER_KEY: '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d' }, 'GATE402_CHANNEL_AUTHORIZER_KEY'); // the test mnemonic's second key
});
