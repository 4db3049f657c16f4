import t, { type Test } from 'tap';
import { rmSync } from 'node:fs';
import { parseEther, parseUnits, type Address, type Hex, type LocalAccount } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2, MULTICALL3_ADDRESS } from '../src/chain/canonical.ts';
import { stablecoinArtifact } from '../src/devnet/contracts/artifacts/index.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import type { PaymentRecord } from '../src/engine/payment-record.ts';
import { nonceKeyOf } from '../src/schemes/payment-identity.ts';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import type { Eip3009Payload, PaymentPayload, SettleResponse } from '../src/protocol/x402/types.ts';
import { clientsFor, freshAccount, tester } from './helpers/devnet.ts';
import { fundedPayer, officialPayment, postJson, requirementsFor, stableBalance } from './helpers/payments.ts';
import { spawnOwnDevnet } from './helpers/spawn-devnet.ts';
import { spawnFacilitator, type SpawnedFacilitator } from './helpers/spawn-facilitator.ts';
import { scrape, valueOf as metricValue } from './helpers/prometheus.ts';
import { tempDir } from './helpers/temp-dir.ts';

// Mining is paused in some tests, which would stall every other test on the shared devnet: this file runs its own
// chains. Its relayers are fresh keys, funded with gas by this file's tester and used by nothing else.
const devnet = await spawnOwnDevnet('batching');
t.teardown(() => devnet.stop());

const funder = tester('batching');
function chain(caip2: string): NetworkEntry {
  const n = devnet.manifest.networks[caip2];
  if (!n) throw new Error(`the devnet has no ${caip2}`);
  return n;
}
const base = chain(CAIP2.base);
const stock = chain(CAIP2.stockChain);
const relayerKeys = [generatePrivateKey(), generatePrivateKey()];
const relayers = relayerKeys.map((k) => privateKeyToAccount(k));
for (const n of [base, stock]) {
  const { pub, wallet } = clientsFor(n, funder);
  for (const r of relayers) await pub.waitForTransactionReceipt({ hash: await wallet.sendTransaction({ to: r.address, value: parseEther('5') }) });
}
const env = {
  GATE402_RELAYER_KEYS: relayerKeys.join(','),
  // Requests sent together meet in one batch however the machine schedules them: each batch waits its whole window,
  // long enough for a loaded 2-core machine to get every request of a burst to the facilitator.
  GATE402_BATCH_WINDOW_MS: '1500',
  GATE402_BATCH_EAGER: 'false',
  GATE402_BATCH_MAX: '16',
  // Each payment waits its batch's whole window in the settlement queue: the queue's wait bound (default 500 ms) must
  // exceed it, or a burst a loaded machine spreads over more than 500 ms is shed (seen: queue_slow at load average 20).
  GATE402_SETTLE_QUEUE_WAIT_MS: '60000',
  GATE402_CONFIRM_DEADLINE_MS: '1500',
  GATE402_FACILITATOR_RATE_CAPACITY: '100000',
  GATE402_FACILITATOR_RATE_PER_SECOND: '100000',
  GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '100000',
  GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '100000',
};
const fac = await spawnFacilitator({ manifestPath: devnet.manifestPath, env });
t.teardown(() => fac.stop());

/** Transactions the relayers have had mined on a chain: settlements cost one each, batched or not. */
async function relayerTransactions(n: NetworkEntry): Promise<number> {
  const { pub } = clientsFor(n, funder);
  const counts = await Promise.all(relayers.map((r) => pub.getTransactionCount({ address: r.address, blockTag: 'latest' })));
  return counts.reduce((a, b) => a + b, 0);
}

interface Payment {
  payer: LocalAccount;
  payTo: Address;
  amount: bigint;
  body: { x402Version: 2; paymentPayload: PaymentPayload; paymentRequirements: ReturnType<typeof requirementsFor> };
}

async function payment(caip2: string, payer: LocalAccount, payTo: Address, amount: bigint): Promise<Payment> {
  const req = requirementsFor(caip2, chain(caip2), payTo, amount.toString());
  return { payer, payTo, amount, body: { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req } };
}

/**
 * A facilitator with a data directory of its own (to be killed and started again on it), with `firstEnv` on top of
 * the file's settings, and `count` payments to one fresh payee from fresh payers, with the balances and relayer
 * transactions before them.
 */
async function restartable(t: Test, count: number, firstAmount: bigint, firstEnv: Record<string, string> = {}) {
  const dataDir = tempDir('batching-data');
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const first = await spawnFacilitator({ manifestPath: devnet.manifestPath, env: { ...env, ...firstEnv }, dataDir });
  t.teardown(() => first.stop('SIGKILL')); // a test that fails before its kill leaves no facilitator behind
  const payTo = freshAccount().address;
  const payers = await fundedPayers(base, CAIP2.base, count);
  const ps = await Promise.all(payers.map((p, i) => payment(CAIP2.base, p, payTo, firstAmount + BigInt(i))));
  return { dataDir, first, ps, before: await balances(base, ps), txsBefore: await relayerTransactions(base) };
}

/** Nothing mines on eip155:8453 until the test ends (or mining is turned on again). */
async function pauseMining(t: Test): Promise<void> {
  await rpcCall(base.rpcUrl, 'evm_setAutomine', [false]);
  t.teardown(() => rpcCall(base.rpcUrl, 'evm_setAutomine', [true]));
}

/** Fresh payers holding 1 unit of the chain's stablecoin each (funded one after the other: one funder, one nonce). */
async function fundedPayers(n: NetworkEntry, caip2: string, count: number): Promise<LocalAccount[]> {
  const payers: LocalAccount[] = [];
  for (let i = 0; i < count; i++) payers.push(await fundedPayer(n, caip2, funder, parseUnits('1', 6)));
  return payers;
}

/** One /settle: the result, or (still unconfirmed at the facilitator's deadline) a pending answer. */
const ask = async (f: SpawnedFacilitator, p: Payment) => (await postJson(`${f.url}/settle`, p.body)).json as SettleResponse;

/** The final answer: /settle asked again while it says pending (a busy machine may take longer than the deadline). */
async function settle(f: SpawnedFacilitator, p: Payment): Promise<SettleResponse> {
  let answer = await ask(f, p);
  for (let i = 0; i < 30 && answer.status === 'pending'; i++) answer = await ask(f, p);
  return answer;
}

/** Balances of every payer and payee involved, keyed by address. */
async function balances(n: NetworkEntry, ps: Payment[]): Promise<Map<Address, bigint>> {
  const who = [...new Set(ps.flatMap((p) => [p.payer.address, p.payTo]))];
  return new Map(await Promise.all(who.map(async (a) => [a, await stableBalance(n, a)] as const)));
}

/** Each settled payment moved exactly its amount from its payer to its payee, once; the others moved nothing. */
function movedExactly(t: Test, before: Map<Address, bigint>, after: Map<Address, bigint>, settled: Payment[]) {
  const expected = new Map(before);
  for (const p of settled) {
    expected.set(p.payer.address, (expected.get(p.payer.address) ?? 0n) - p.amount);
    expected.set(p.payTo, (expected.get(p.payTo) ?? 0n) + p.amount);
  }
  t.same(
    [...after].map(([a, v]) => [a, v.toString()]),
    [...after].map(([a]) => [a, (expected.get(a) ?? 0n).toString()]),
    'every balance moved by exactly the settled amounts',
  );
}

t.test('12 concurrent EIP-3009 payments settle in fewer than 12 transactions, each moving exactly its amount', async (t) => {
  const payees = [freshAccount().address, freshAccount().address, freshAccount().address];
  const payers = await fundedPayers(base, CAIP2.base, 10);
  const ps: Payment[] = [];
  for (const [i, payer] of payers.entries()) ps.push(await payment(CAIP2.base, payer, payees[i % 3] as Address, 10_000n + BigInt(i)));
  // The same payer paying the same payee the same amount twice: two authorizations that only their nonces tell apart.
  ps.push(await payment(CAIP2.base, payers[0] as LocalAccount, payees[0] as Address, 10_000n));
  ps.push(await payment(CAIP2.base, payers[0] as LocalAccount, payees[0] as Address, 10_000n));
  const before = await balances(base, ps);
  const txsBefore = await relayerTransactions(base);
  const answers = await Promise.all(ps.map((p) => settle(fac, p)));
  t.ok(
    answers.every((a) => a.success),
    `every payment settled: ${JSON.stringify(answers.filter((a) => !a.success))}`,
  );
  const hashes = new Set(answers.map((a) => a.transaction));
  const sent = (await relayerTransactions(base)) - txsBefore;
  t.ok(sent < ps.length && sent === hashes.size, `${ps.length} payments in ${sent} transaction(s)`);
  const { pub } = clientsFor(base, funder);
  for (const h of hashes) {
    const receipt = await pub.getTransactionReceipt({ hash: h as Hex });
    if (receipt.to?.toLowerCase() !== MULTICALL3_ADDRESS.toLowerCase()) t.fail(`${h} was not a batch`);
  }
  movedExactly(t, before, await balances(base, ps), ps);
  const again = await settle(fac, ps[3] as Payment);
  t.same(again, answers[3], 'a settled payload asked again answers its recorded result');
});

t.test('a batch of calls the network has estimated before is run once at the gas it is sent with, not estimated again', async (t) => {
  // The first test's batches were estimated: calls to the stablecoin have a known cost on this network.
  const rpcs = async () => {
    const m = await scrape(`${fac.url}/metrics`);
    const of = (method: string) => metricValue(m, 'gate402_rpc_request_duration_seconds_count', { chain: CAIP2.base, method, outcome: 'ok' }) ?? 0;
    return { estimates: of('eth_estimateGas'), calls: of('eth_call') };
  };
  const payTo = freshAccount().address;
  const payers = await fundedPayers(base, CAIP2.base, 6);
  const ps = await Promise.all(payers.map((p, i) => payment(CAIP2.base, p, payTo, 20_000n + BigInt(i))));
  const before = await balances(base, ps);
  const rpcBefore = await rpcs();
  const answers = await Promise.all(ps.map((p) => settle(fac, p)));
  const rpcAfter = await rpcs();
  t.ok(
    answers.every((a) => a.success),
    `every payment settled: ${JSON.stringify(answers.filter((a) => !a.success))}`,
  );
  const hashes = [...new Set(answers.map((a) => a.transaction as Hex))];
  t.ok(hashes.length < ps.length, `${ps.length} payments in ${hashes.length} transaction(s)`);
  t.equal(rpcAfter.estimates - rpcBefore.estimates, 0, 'no gas estimate (an estimate runs the batch several times)');
  t.ok(rpcAfter.calls - rpcBefore.calls >= hashes.length, `one run of each batch at its limit (${rpcAfter.calls - rpcBefore.calls} eth_call)`);
  const { pub } = clientsFor(base, funder);
  for (const hash of hashes) {
    const [tx, receipt] = await Promise.all([pub.getTransaction({ hash }), pub.getTransactionReceipt({ hash })]);
    t.ok(receipt.gasUsed < tx.gas, `${hash}: ${receipt.gasUsed} gas used under its limit of ${tx.gas}`);
  }
  movedExactly(t, before, await balances(base, ps), ps);
});

t.test('eager batching: with a long window, a payment nobody follows leaves at once; payments sent together still share a transaction', async (t) => {
  // The longest window there is: a busy machine is far quicker than waiting it out.
  const windowMs = 10_000;
  const eager = await spawnFacilitator({ manifestPath: devnet.manifestPath, env: { ...env, GATE402_BATCH_WINDOW_MS: String(windowMs), GATE402_BATCH_EAGER: 'true' } });
  t.teardown(() => eager.stop());
  const payTo = freshAccount().address;
  const payers = await fundedPayers(base, CAIP2.base, 7);
  const ps = await Promise.all(payers.map((p, i) => payment(CAIP2.base, p, payTo, 80_000n + BigInt(i))));
  const before = await balances(base, ps);
  const started = Date.now();
  t.equal((await settle(eager, ps[0] as Payment)).success, true, 'a lone payment settles');
  t.ok(Date.now() - started < windowMs, `without waiting out the ${windowMs / 1000} s window (${Date.now() - started} ms)`);
  const txsBefore = await relayerTransactions(base);
  const answers = await Promise.all(ps.slice(1).map((p) => settle(eager, p)));
  t.ok(
    answers.every((a) => a.success),
    'six sent together settle',
  );
  const sent = (await relayerTransactions(base)) - txsBefore;
  t.ok(sent < 6, `in ${sent} transaction(s)`);
  movedExactly(t, before, await balances(base, ps), ps);
});

t.test('Permit2 payments through the exact-permit proxy batch too; two that logs could not tell apart never share a batch', async (t) => {
  const payTo = freshAccount().address;
  const payers = await fundedPayers(stock, CAIP2.stockChain, 4);
  const ps: Payment[] = [];
  for (const [i, payer] of payers.entries()) ps.push(await payment(CAIP2.stockChain, payer, payTo, 20_000n + BigInt(i)));
  ps.push(await payment(CAIP2.stockChain, payers[0] as LocalAccount, payTo, 20_000n));
  const before = await balances(stock, ps);
  const txsBefore = await relayerTransactions(stock);
  const answers = await Promise.all(ps.map((p) => settle(fac, p)));
  t.ok(
    answers.every((a) => a.success),
    `every payment settled: ${JSON.stringify(answers.filter((a) => !a.success))}`,
  );
  const sent = (await relayerTransactions(stock)) - txsBefore;
  t.ok(sent >= 2 && sent < ps.length, `${ps.length} payments in ${sent} transactions`);
  t.not(answers[0]?.transaction, answers[4]?.transaction, 'the two identical transfers went in different transactions');
  movedExactly(t, before, await balances(stock, ps), ps);
});

t.test('in a batch, an authorization someone else settled already is reported settled by their transaction, an unfunded payer refused; the others settle', async (t) => {
  const payTo = freshAccount().address;
  const payers = await fundedPayers(base, CAIP2.base, 4);
  const good = await Promise.all(payers.map((p, i) => payment(CAIP2.base, p, payTo, 30_000n + BigInt(i))));
  const usedPayer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const used = await payment(CAIP2.base, usedPayer, payTo, 30_000n);
  const theirs = await submitDirectly(used); // someone else settled it on chain already
  const broke = await payment(CAIP2.base, freshAccount(), payTo, 30_000n);
  const ps = [good[0], used, good[1], broke, good[2], good[3]] as Payment[];
  const before = await balances(base, ps);
  const txsBefore = await relayerTransactions(base);
  const answers = await Promise.all(ps.map((p) => settle(fac, p)));
  t.same(
    answers.map((a) => a.success || a.errorReason),
    [true, true, true, 'invalid_exact_evm_insufficient_balance', true, true],
    'only the unfunded payment is refused, for its reason',
  );
  t.equal(answers[1]?.transaction, theirs, 'the one settled already names the transaction that settled it');
  t.equal((await relayerTransactions(base)) - txsBefore, 1, 'the four good ones in one transaction, nothing sent for the settled one');
  movedExactly(t, before, await balances(base, ps), good);
});

t.test('a batch member whose authorization is used by someone else before the batch mines is settled by their transaction; the rest by the batch', async (t) => {
  const payTo = freshAccount().address;
  const payers = await fundedPayers(base, CAIP2.base, 5);
  const ps = await Promise.all(payers.map((p, i) => payment(CAIP2.base, p, payTo, 40_000n + BigInt(i))));
  const before = await balances(base, ps);
  await pauseMining(t);
  const pending = await Promise.all(ps.map((p) => ask(fac, p)));
  t.ok(
    pending.every((a) => a.status === 'pending'),
    'all pending while nothing mines',
  );
  t.equal(new Set(pending.map((a) => a.transaction)).size, 1, 'all in one batch transaction');
  // Payment 2's authorization goes in first, by another sender paying a higher tip: the batch's call for it reverts.
  const theirs = await submitDirectly(ps[2] as Payment, { wait: false });
  await rpcCall(base.rpcUrl, 'evm_mine', []);
  const answers = await Promise.all(ps.map((p) => settle(fac, p)));
  t.same(
    answers.map((a) => a.success || a.errorReason),
    [true, true, true, true, true],
    'every payment settled: the front-run one too',
  );
  t.same(
    answers.map((a) => a.transaction),
    ps.map((_, i) => (i === 2 ? theirs : pending[0]?.transaction)),
    "the front-run one by the other sender's transaction, the others by the batch",
  );
  // Payment 2's money moved too, once, by the other sender: the payee got every amount exactly once.
  movedExactly(t, before, await balances(base, ps), ps);
});

t.test('SIGKILL with a batch in flight: the restarted facilitator completes every member from the records, with that one transaction', async (t) => {
  const { dataDir, first, ps, before, txsBefore } = await restartable(t, 6, 50_000n);
  await pauseMining(t);
  const pending = await Promise.all(ps.map((p) => ask(first, p)));
  t.ok(
    pending.every((a) => a.status === 'pending'),
    'all pending',
  );
  t.equal(new Set(pending.map((a) => a.transaction)).size, 1, 'in one batch transaction');
  await first.stop('SIGKILL');
  // The batch transaction is lost from the node too, as in a node restart: only the records can bring it back.
  await rpcCall(base.rpcUrl, 'anvil_dropTransaction', [pending[0]?.transaction]);

  const second = await spawnFacilitator({ manifestPath: devnet.manifestPath, env, dataDir });
  t.teardown(() => second.stop());
  await rpcCall(base.rpcUrl, 'evm_mine', []);
  await rpcCall(base.rpcUrl, 'evm_setAutomine', [true]);
  const answers = await Promise.all(ps.map((p) => settle(second, p)));
  t.ok(
    answers.every((a) => a.success),
    `every member settled: ${JSON.stringify(answers.filter((a) => !a.success))}`,
  );
  t.ok(
    answers.every((a) => a.transaction === pending[0]?.transaction),
    'by the batch transaction signed before the crash',
  );
  t.equal((await relayerTransactions(base)) - txsBefore, 1, 'one transaction on chain');
  movedExactly(t, before, await balances(base, ps), ps);
});

t.test('a batch priced out by the base fee is replaced; killed after that, the restart carries the replacement', async (t) => {
  const { dataDir, first, ps, before, txsBefore } = await restartable(t, 3, 70_000n);
  await pauseMining(t);
  const pending = await Promise.all(ps.map((p) => ask(first, p)));
  const sent = pending[0]?.transaction as Hex;
  t.ok(
    pending.every((a) => a.status === 'pending' && a.transaction === sent),
    'pending, in one batch transaction',
  );
  // Blocks now demand far more than the batch offers: it can never be included as it is.
  await rpcCall(base.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${(1000n * 10n ** 9n).toString(16)}`]);
  await rpcCall(base.rpcUrl, 'evm_mine', []);
  let replacement: Hex | undefined;
  for (let i = 0; i < 600 && !replacement; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const pool = (await rpcCall<{ pending: Record<string, Record<string, { hash: Hex }>> }>(base.rpcUrl, 'txpool_content', [])).pending;
    for (const [from, byNonce] of Object.entries(pool)) {
      if (!relayers.some((r) => r.address.toLowerCase() === from.toLowerCase())) continue;
      for (const tx of Object.values(byNonce)) if (tx.hash !== sent) replacement = tx.hash;
    }
  }
  t.ok(replacement, 'a replacement was broadcast');
  const again = await Promise.all(ps.map((p) => ask(first, p)));
  t.ok(
    again.every((a) => a.status === 'pending' && a.transaction === replacement),
    'every member now names the replacement',
  );
  await first.stop('SIGKILL');

  const second = await spawnFacilitator({ manifestPath: devnet.manifestPath, env, dataDir });
  t.teardown(() => second.stop());
  await rpcCall(base.rpcUrl, 'evm_setAutomine', [true]);
  await rpcCall(base.rpcUrl, 'evm_mine', []);
  const answers = await Promise.all(ps.map((p) => settle(second, p)));
  t.ok(
    answers.every((a) => a.success && a.transaction === replacement),
    `every member settled by the replacement: ${JSON.stringify(answers)}`,
  );
  t.equal((await relayerTransactions(base)) - txsBefore, 1, 'one transaction on chain: the replacement took the nonce');
  movedExactly(t, before, await balances(base, ps), ps);
  // Gas back to its price before: at 1000 gwei the price floor (rightly) refuses the later tests' 0.01 payments.
  await rpcCall(base.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${(10n ** 9n).toString(16)}`]);
  await rpcCall(base.rpcUrl, 'evm_mine', []);
});

t.test('SIGKILL with payments claimed but their batch not yet sent: after the restart each settles once', async (t) => {
  // The stopped chain answers nothing: each call the facilitator makes meanwhile ends at its RPC timeout (three tries),
  // so the payments are claimed after three timeouts. 2 s instead of the default 10 s (30 s waited out in all).
  const { dataDir, first, ps, before } = await restartable(t, 4, 60_000n, { GATE402_RPC_TIMEOUT_MS: '2000' });
  const warmUp = await payment(CAIP2.base, (await fundedPayers(base, CAIP2.base, 1))[0] as LocalAccount, freshAccount().address, 10_000n);
  t.equal((await settle(first, warmUp)).success, true, 'a first payment settles (the facilitator has read what verification needs)');
  const txsBefore = await relayerTransactions(base);
  // The chain stops answering: the payments are verified and claim their nonces, and their batch hangs on its first call.
  const chainProcess = devnet.anvilPid(base.chainId);
  process.kill(chainProcess, 'SIGSTOP');
  t.teardown(() => process.kill(chainProcess, 'SIGCONT'));
  const requests = ps.map((p) => ask(first, p).catch(() => undefined));
  // Killed once every payment is claimed and recorded, read from its store as the restart will read it.
  for (let i = 0; i < 600 && !(await recordsIn(dataDir, ps)).every((r) => r !== undefined); i++) await new Promise((r) => setTimeout(r, 100));
  await first.stop('SIGKILL');
  await Promise.all(requests);
  process.kill(chainProcess, 'SIGCONT');
  t.equal((await relayerTransactions(base)) - txsBefore, 0, 'nothing was sent before the crash');
  const left = await recordsIn(dataDir, ps);
  t.ok(
    left.every((r) => r !== undefined && r.txs.length === 0 && !r.batch),
    `each payment was claimed and recorded, with nothing signed: ${left.map((r) => r?.state).join(',')}`,
  );

  const second = await spawnFacilitator({ manifestPath: devnet.manifestPath, env, dataDir });
  t.teardown(() => second.stop());
  const answers = await Promise.all(ps.map((p) => settle(second, p)));
  t.ok(
    answers.every((a) => a.success),
    `every payment settled: ${JSON.stringify(answers.filter((a) => !a.success))}`,
  );
  t.ok((await relayerTransactions(base)) - txsBefore < ps.length, 'batched after the restart');
  movedExactly(t, before, await balances(base, ps), ps);
  const again = await Promise.all(ps.map((p) => settle(second, p)));
  t.same(again, answers, 'asked again: the recorded answers');
  movedExactly(t, before, await balances(base, ps), ps);
});

/** The payments' records in a facilitator's data directory (LMDB: readable beside the running facilitator). */
async function recordsIn(dataDir: string, ps: Payment[]): Promise<Array<PaymentRecord | undefined>> {
  const store = openLmdbStore(dataDir);
  try {
    return await Promise.all(ps.map((p) => store.collection<PaymentRecord>('payments').get(nonceKeyOf(p.body))));
  } finally {
    await store.close();
  }
}

/** Another sender (this file's tester) submits a payment's authorization itself, at a higher tip than the relayers pay. */
async function submitDirectly(p: Payment, opts: { wait?: boolean } = {}): Promise<Hex> {
  const payload = p.body.paymentPayload.payload as Eip3009Payload;
  const a = payload.authorization;
  const { pub, wallet } = clientsFor(base, funder);
  const hash = await wallet.writeContract({
    address: base.stablecoin.address,
    abi: stablecoinArtifact.abi,
    functionName: 'transferWithAuthorization',
    args: [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, payload.signature],
    gas: 150_000n,
    maxPriorityFeePerGas: parseUnits('2', 9),
    maxFeePerGas: parseUnits('50', 9),
  });
  if (opts.wait ?? true) await pub.waitForTransactionReceipt({ hash });
  return hash;
}
