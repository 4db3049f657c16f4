import t, { type Test } from 'tap';
import { rmSync } from 'node:fs';
import { parseEther, parseUnits, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { clientsFor, freshAccount, tester } from './helpers/devnet.ts';
import { fundedPayer, officialPayment, postJson, requirementsFor, stableBalance } from './helpers/payments.ts';
import { spawnOwnDevnet } from './helpers/spawn-devnet.ts';
import { spawnFacilitator, type SpawnedFacilitator } from './helpers/spawn-facilitator.ts';
import { tempDir } from './helpers/temp-dir.ts';

// Pausing mining would stall every other test, so this file runs its own chains, in a directory of its own.
const devnet = await spawnOwnDevnet('recovery');
t.teardown(() => devnet.stop());
const n = devnet.manifest.networks[CAIP2.base];
if (!n) throw new Error('no base network');
// Fresh relayer keys, used by nothing else: their nonces count exactly the facilitators' transactions.
const relayerKeys = [generatePrivateKey(), generatePrivateKey()];
const relayers = relayerKeys.map((k) => privateKeyToAccount(k));
for (const r of relayers) await rpcCall(n.rpcUrl, 'anvil_setBalance', [r.address, toHex(parseEther('10'))]);
const env = { GATE402_RELAYER_KEYS: relayerKeys.join(','), GATE402_CONFIRM_DEADLINE_MS: '1500', GATE402_RECEIPT_POLL_MS: '100' };
const funder = tester('recovery');
/** Nothing mines until the test resumes mining, or its teardown does (whatever failed before). */
const pauseMining = async (t: Test) => {
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [false]);
  t.teardown(() => resumeMining());
};
const resumeMining = async () => {
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
};
const relayerTxCount = async () => {
  const { pub } = clientsFor(n, funder);
  const counts = await Promise.all(relayers.map((r) => pub.getTransactionCount({ address: r.address, blockTag: 'latest' })));
  return counts.reduce((a, b) => a + b, 0);
};
const settleBody = async (payer: Awaited<ReturnType<typeof fundedPayer>>, payTo: `0x${string}`) => {
  const req = requirementsFor(CAIP2.base, n, payTo, '10000');
  return { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req };
};
type Settle = { success: boolean; transaction: string; status?: string; errorReason?: string };
/** /settle asked again while it answers pending, as a client holding a pending answer does (a busy machine may take longer than the deadline). */
const settleUntilFinal = async (fac: SpawnedFacilitator, body: unknown): Promise<Settle> => {
  for (;;) {
    const r = (await postJson(`${fac.url}/settle`, body)).json as Settle;
    if (r.status !== 'pending') return r;
    await new Promise((res) => setTimeout(res, 100));
  }
};

t.test('with mining paused, settle answers pending with the hash; after mining resumes, success with that same hash', async (t) => {
  const fac = await spawnFacilitator({ manifestPath: devnet.manifestPath, env });
  t.teardown(() => fac.stop());
  const payer = await fundedPayer(n, CAIP2.base, funder, parseUnits('1', 6));
  const payTo = freshAccount().address;
  const body = await settleBody(payer, payTo);
  const txsBefore = await relayerTxCount();
  await pauseMining(t);
  const pending = await postJson(`${fac.url}/settle`, body);
  t.equal(pending.status, 200);
  const p = pending.json as { success: boolean; errorReason: string; status: string; transaction: string };
  t.same([p.success, p.errorReason, p.status], [false, 'settlement_pending', 'pending'], 'pending, not failed');
  t.match(p.transaction, /^0x[0-9a-f]{64}$/, 'with the broadcast hash');
  await resumeMining();
  const d = await settleUntilFinal(fac, body);
  t.equal(d.success, true, JSON.stringify(d));
  t.equal(d.transaction, p.transaction, 'the same transaction');
  t.equal((await relayerTxCount()) - txsBefore, 1, 'one transaction sent: no second broadcast');
  t.equal(await stableBalance(n, payTo), 10_000n, 'the price moved once');
  t.equal(await stableBalance(n, payer.address), 990_000n, 'the payer paid once');
});

t.test('a facilitator killed while awaiting the receipt completes the settlement from its record, with one transaction', async (t) => {
  const dataDir = tempDir('recovery');
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const first = await spawnFacilitator({ manifestPath: devnet.manifestPath, env, dataDir });
  t.teardown(() => first.stop('SIGKILL')); // a test failing before its kill leaves no facilitator behind
  const payer = await fundedPayer(n, CAIP2.base, funder, parseUnits('1', 6));
  const payTo = freshAccount().address;
  const body = await settleBody(payer, payTo);
  const txsBefore = await relayerTxCount();
  await pauseMining(t);
  const pending = (await postJson(`${first.url}/settle`, body)).json as { transaction: string; status: string };
  t.equal(pending.status, 'pending');
  await first.stop('SIGKILL');

  const second = await spawnFacilitator({ manifestPath: devnet.manifestPath, env, dataDir });
  t.teardown(() => second.stop());
  await resumeMining();
  const done = await settleUntilFinal(second, body);
  t.equal(done.success, true, JSON.stringify(done));
  t.equal(done.transaction, pending.transaction, 'completed by the transaction sent before the crash');
  t.equal((await relayerTxCount()) - txsBefore, 1, 'one transaction on chain');
  t.equal(await stableBalance(n, payTo), 10_000n, 'the price moved once');
  t.equal(await stableBalance(n, payer.address), 990_000n);
});

t.test('a transaction priced out by the base fee is replaced with a higher fee, not forgotten', async (t) => {
  const fac = await spawnFacilitator({ manifestPath: devnet.manifestPath, env });
  t.teardown(() => fac.stop());
  const payer = await fundedPayer(n, CAIP2.base, funder, parseUnits('1', 6));
  const payTo = freshAccount().address;
  const body = await settleBody(payer, payTo);
  const txsBefore = await relayerTxCount();
  await pauseMining(t);
  const first = (await postJson(`${fac.url}/settle`, body)).json as { transaction: string; status: string };
  t.equal(first.status, 'pending');
  // Blocks now demand far more than the transaction offers: it can never be included as it is.
  await rpcCall(n.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${(1000n * 10n ** 9n).toString(16)}`]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  const { pub } = clientsFor(n, funder);
  // Asked until the pool shows a replacement (the facilitator checks a stuck transaction every few seconds).
  let replacement: string | undefined;
  while (!replacement) {
    await new Promise((r) => setTimeout(r, 100));
    const pool = (await rpcCall<{ pending: Record<string, Record<string, { hash: string }>> }>(n.rpcUrl, 'txpool_content', [])).pending;
    for (const byNonce of Object.values(pool)) for (const tx of Object.values(byNonce)) if (tx.hash !== first.transaction) replacement = tx.hash;
  }
  t.ok(replacement, 'a replacement was broadcast');
  await resumeMining();
  const done = await settleUntilFinal(fac, body);
  t.equal(done.success, true, JSON.stringify(done));
  t.equal(done.transaction, replacement, 'the replacement settled the payment');
  const mined = await pub.getTransaction({ hash: done.transaction as `0x${string}` });
  t.ok(mined.maxFeePerGas !== undefined && mined.maxFeePerGas > 1000n * 10n ** 9n, 'with a fee above the raised base fee');
  t.equal((await relayerTxCount()) - txsBefore, 1, 'one transaction on chain: the replacement took the original nonce');
  t.equal(await stableBalance(n, payTo), 10_000n, 'the price moved once');
});
