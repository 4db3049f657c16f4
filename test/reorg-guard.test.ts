import t, { type Test } from 'tap';
import { rmSync } from 'node:fs';
import { parseEther, type Address, type Hex } from 'viem';
import { startAnvil } from '../src/devnet/anvil.ts';
import { publicClientFor } from '../src/chain/clients.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { DEVNET_TEST_MNEMONIC, devnetAccount } from '../src/devnet/accounts.ts';
import { createLogger, type LogFields } from '../src/log/logger.ts';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import { ReorgGuard, reorgChainOf, type ReorgChain, type WatchedTx } from '../src/tx/reorg-guard.ts';
import { RelayerPool } from '../src/tx/relayer-pool.ts';
import type { SignedTx } from '../src/tx/trail.ts';
import { freePort, freshAccount } from './helpers/devnet.ts';
import { tempDir } from './helpers/temp-dir.ts';

// A chain of this file's own (a reorg would disturb every other test on the shared devnet), automine: a block per
// transaction. The relayer sends plain value transfers, so "paid once" is a recipient's balance.
const anvil = await startAnvil({ chainId: 31_337, port: await freePort(), mnemonic: DEVNET_TEST_MNEMONIC, fundedAccounts: 4 });
t.teardown(() => anvil.stop());
const dir = tempDir('reorg-guard');
const store = openLmdbStore(dir);
t.teardown(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const calls = new Map<string, number>();
const count = (method: string) => calls.get(method) ?? 0;
const client = publicClientFor(31_337, anvil.rpcUrl, { observe: (method) => calls.set(method, count(method) + 1) });
const pool = new RelayerPool({ chainId: 31_337, client, accounts: [devnetAccount(2)] });
await pool.init();
const warnings: Array<[string, LogFields | undefined]> = [];
const base = createLogger('test', { level: 'error' });
const log = { ...base, warn: (msg: string, fields?: LogFields) => void warnings.push([msg, fields]), error: (msg: string, fields?: LogFields) => void warnings.push([msg, fields]) };
const watched = store.collection<WatchedTx>('reorg-watch');
const guardOn = (chain: ReorgChain = reorgChainOf(client, pool)) => new ReorgGuard({ chainId: 31_337, chain, watched, depth: 5, log });
const VALUE = parseEther('0.01');

/**
 * The receipt of `hash`, asked for until it is there. Not viem's `waitForTransactionReceipt`: after its first look it
 * looks again only when a new block comes, and on this chain, mined only by what the test sends, none may come (seen
 * once in a loop: a first look that found nothing, then 180 s without a block).
 */
async function receiptOf(hash: Hex) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const receipt = await client.getTransactionReceipt({ hash }).catch(() => undefined);
    if (receipt) return receipt;
    if (Date.now() > deadline) throw new Error(`no receipt for ${hash} within 60 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A transfer of VALUE to a fresh account, sent and mined (automine), then watched. */
async function pay(t: Test, guard: ReorgGuard): Promise<{ tx: SignedTx; to: Address }> {
  const to = freshAccount().address;
  const tx = await pool.sign({ to, data: '0x', gas: 21_000n, value: VALUE });
  t.equal(await pool.broadcast(tx), 'sent');
  const receipt = await receiptOf(tx.hash);
  pool.done(tx);
  await guard.watch(tx, receipt, `transfer to ${to}`);
  return { tx, to };
}
const balance = (address: Address) => client.getBalance({ address });
const mine = (n: number) => rpcCall(anvil.rpcUrl, 'anvil_mine', [`0x${n.toString(16)}`]);

t.test('while the chain only grows, a check costs one head read (and one block read after a gap); final transactions are let go', async (t) => {
  const guard = guardOn();
  await pay(t, guard);
  t.equal((await guard.check()).reorganised, true, 'the first check has no head to compare: it looks everything up');
  calls.clear();
  t.notOk((await guard.check()).reorganised, 'nothing changed');
  await mine(1);
  t.notOk((await guard.check()).reorganised, 'one block more: its parent is the last head');
  await mine(2);
  t.notOk((await guard.check()).reorganised, 'two blocks more: the last head is still canonical');
  t.equal(count('eth_getBlockByNumber'), 4, 'four reads for three checks: a head each, and the last head once after the gap');
  t.equal(count('eth_getTransactionReceipt'), 0, 'no receipt looked up while no reorg happened');
  await mine(3);
  const r = await guard.check();
  t.equal(r.final, 1, 'five blocks deep: final');
  t.equal(guard.size, 0);
  let left = 0;
  for await (const _ of watched.entries('31337:')) left++;
  t.equal(left, 0, 'and gone from the durable list');
});

t.test('a reorg that drops mined transfers: the guard sends the same bytes again, and each recipient is paid once', async (t) => {
  warnings.length = 0;
  const guard = guardOn();
  const first = await pay(t, guard);
  const dropped = [await pay(t, guard), await pay(t, guard)];
  await guard.check();
  // The last two blocks (one transfer each) are replaced by two empty ones.
  await rpcCall(anvil.rpcUrl, 'anvil_reorg', [2, []]);
  for (const d of dropped) t.equal(await balance(d.to), 0n, 'the reorg took the transfer back');
  const report = await guard.check();
  t.ok(report.reorganised, 'the reorg is noticed');
  t.same(
    report.outcomes.map((o) => [o.hash, o.outcome]),
    dropped.map((d) => [d.tx.hash, 'resent']),
    'the two dropped transfers were sent again, in nonce order; the first, still mined, was left alone',
  );
  await mine(1);
  for (const d of [first, ...dropped]) t.equal(await balance(d.to), VALUE, 'each recipient holds one transfer');
  for (const d of dropped) t.equal((await client.getTransactionReceipt({ hash: d.tx.hash })).status, 'success', 'under the same hash');
  t.ok(
    warnings.some(([msg, f]) => msg.includes('sent the same signed transaction again') && f?.tx === dropped[0]?.tx.hash),
    'the log says what was sent again',
  );
  await guard.check();
  const still: string[] = [];
  for await (const [, w] of watched.entries('31337:')) if (w.blockNumber !== undefined) still.push(w.tx.hash);
  t.same(still.sort(), dropped.map((d) => d.tx.hash).sort(), 'the re-mined transfers are watched at their new blocks (the first is five blocks deep: final)');
  const next = await pay(t, guard);
  t.equal(next.tx.nonce, (dropped[1]?.tx.nonce ?? 0) + 1, "the relayer's next transaction follows on, no nonce gap");
  t.equal(await balance(next.to), VALUE);
  await mine(6);
  await guard.check();
  t.equal(guard.size, 0);
});

t.test('a reorg that re-includes a transfer in another block is followed, not sent again', async (t) => {
  warnings.length = 0;
  const guard = guardOn();
  const moved = await pay(t, guard);
  await guard.check();
  await rpcCall(anvil.rpcUrl, 'anvil_reorg', [1, [[moved.tx.raw, 0]]]);
  const report = await guard.check();
  t.same(
    report.outcomes.map((o) => o.outcome),
    ['moved'],
  );
  t.equal(await balance(moved.to), VALUE, 'paid once');
  await mine(6);
  await guard.check();
  t.equal(guard.size, 0);
});

t.test('a transaction handed over after a reorg already took its block back is looked up and sent again', async (t) => {
  warnings.length = 0;
  const guard = guardOn();
  await pay(t, guard);
  await guard.check();
  // Mined, its receipt read, but not yet handed to the guard (a sender does not wait for the watch to be durable).
  const to = freshAccount().address;
  const late = await pool.sign({ to, data: '0x', gas: 21_000n, value: VALUE });
  t.equal(await pool.broadcast(late), 'sent');
  const receipt = await receiptOf(late.hash);
  pool.done(late);
  await rpcCall(anvil.rpcUrl, 'anvil_reorg', [1, []]);
  t.notOk((await guard.check()).reorganised, 'the new head descends from the last one the guard saw: no reorg to notice');
  await guard.watch(late, receipt, `transfer to ${to}`);
  const report = await guard.check();
  t.same(
    report.outcomes.map((o) => [o.hash, o.outcome]),
    [[late.hash, 'resent']],
    'looked up once when handed over: dropped, sent again',
  );
  await mine(1);
  t.equal(await balance(to), VALUE, 'the recipient is paid once');
  await guard.check();
  calls.clear();
  await guard.check();
  t.equal(count('eth_getTransactionReceipt'), 0, 'then no look-ups while nothing changes');
  await mine(6);
  await guard.check();
  t.equal(guard.size, 0);
});

t.test('after a restart the durable watch list is read: a reorg while the node was down is still repaired', async (t) => {
  const before = guardOn();
  const lost = await pay(t, before);
  await rpcCall(anvil.rpcUrl, 'anvil_reorg', [1, []]);
  t.equal(await balance(lost.to), 0n);
  // A new process: a new guard over the same store, knowing no head.
  const after = guardOn();
  const report = await after.check();
  t.same(
    report.outcomes.map((o) => [o.hash, o.outcome]),
    [[lost.tx.hash, 'resent']],
  );
  await mine(1);
  t.equal(await balance(lost.to), VALUE, 'paid once');
  await mine(6);
  await after.check();
  t.equal(after.size, 0);
});

t.test("in a cluster a node reads only its own watch; the node that takes a dead node's work over takes its watch, and repairs a reorg that came while nobody watched", async (t) => {
  const nodeGuard = (node: string) => new ReorgGuard({ chainId: 31_337, chain: reorgChainOf(client, pool), watched, depth: 5, node, log });
  const dead = nodeGuard('n1');
  const first = await pay(t, dead);
  const dropped = await pay(t, dead);
  await dead.check();
  const stored = await watched.get(`31337:${dropped.tx.hash.toLowerCase()}`);
  t.equal(stored?.node, 'n1', 'the durable record names the node that watches it');
  // The node dies; a reorg takes its last transfer back before any node watches it.
  await rpcCall(anvil.rpcUrl, 'anvil_reorg', [1, []]);
  t.equal(await balance(dropped.to), 0n, 'the reorg took the transfer back');
  const survivor = nodeGuard('n2');
  const unaware = await survivor.check();
  t.equal(survivor.size, 0, "a live node does not read another node's watch at its start");
  t.same(unaware.outcomes, [], 'and so sends nothing of it');
  t.equal(await survivor.adopt('n1'), 2, "the dead node's two watched transfers are taken over");
  t.equal(await survivor.adopt('n1'), 0, "once: they are now the survivor's");
  t.equal((await watched.get(`31337:${first.tx.hash.toLowerCase()}`))?.node, 'n2', 'named after the survivor in the durable list');
  const report = await survivor.check();
  t.same(
    report.outcomes.map((o) => [o.hash, o.outcome]),
    [[dropped.tx.hash, 'resent']],
    'the next check looks them up: the dropped one is sent again, the one still mined is left alone',
  );
  await mine(1);
  t.equal(await balance(first.to), VALUE, 'each recipient paid once');
  t.equal(await balance(dropped.to), VALUE, 'each recipient paid once');
  await mine(6);
  await survivor.check();
  t.equal(survivor.size, 0, 'both final, let go');
});

t.test('a dropped transaction whose nonce went to another one is reported lost, not sent forever', async (t) => {
  warnings.length = 0;
  const guard = guardOn();
  const victim = await pay(t, guard);
  await rpcCall(anvil.rpcUrl, 'anvil_reorg', [1, []]);
  // Someone (a replacement signed elsewhere) takes the victim's nonce in the new chain.
  const thief = devnetAccount(2);
  const raw = await thief.signTransaction({
    type: 'eip1559',
    chainId: 31_337,
    nonce: victim.tx.nonce,
    to: thief.address,
    value: 1n,
    gas: 21_000n,
    maxFeePerGas: BigInt(victim.tx.maxFeePerGas),
    maxPriorityFeePerGas: BigInt(victim.tx.maxPriorityFeePerGas),
  });
  await rpcCall<Hex>(anvil.rpcUrl, 'eth_sendRawTransaction', [raw]);
  const report = await guard.check();
  t.same(
    report.outcomes.map((o) => o.outcome),
    ['lost'],
  );
  t.equal(guard.size, 0, 'no longer watched');
  t.ok(
    warnings.some(([msg]) => msg.includes('cannot be sent again')),
    'the log says what is not paid',
  );
  t.equal(await balance(victim.to), 0n);
});
