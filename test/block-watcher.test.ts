import t from 'tap';
import { parseEther, type Hex } from 'viem';
import { startAnvil } from '../src/devnet/anvil.ts';
import { BlockWatcher } from '../src/tx/block-watcher.ts';
import { publicClientFor } from '../src/chain/clients.ts';
import { DEVNET_TEST_MNEMONIC, devnetAccount } from '../src/devnet/accounts.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { createLogger } from '../src/log/logger.ts';
import { freePort, freshAccount } from './helpers/devnet.ts';

// A bare chain of this file's own, mined by hand: nothing else sends to it, so every call counted is the watcher's.
const anvil = await startAnvil({ chainId: 31_337, port: await freePort(), mnemonic: DEVNET_TEST_MNEMONIC, fundedAccounts: 4 });
t.teardown(() => anvil.stop());
await rpcCall(anvil.rpcUrl, 'evm_setAutomine', [false]);

const calls = new Map<string, number>();
const count = (method: string) => calls.get(method) ?? 0;
const client = publicClientFor(31_337, anvil.rpcUrl, { observe: (method) => calls.set(method, count(method) + 1) });
const log = createLogger('test', { level: 'error' });
const watcher = new BlockWatcher({ client, pollMs: 20, timeoutMs: 2000, log });
t.teardown(() => watcher.stop());
const sender = devnetAccount(1);
let nonce = 0;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Signs and sends a transfer without waiting for anything, through a connection the watcher does not count. */
async function send(): Promise<Hex> {
  const raw = await sender.signTransaction({
    type: 'eip1559',
    chainId: 31_337,
    nonce: nonce++,
    to: freshAccount().address,
    value: parseEther('0.001'),
    gas: 21_000n,
    maxFeePerGas: 10n ** 10n,
    maxPriorityFeePerGas: 1n,
  });
  return rpcCall<Hex>(anvil.rpcUrl, 'eth_sendRawTransaction', [raw]);
}

t.test('twenty transactions in one block: each waiter gets its own receipt, for one block fetch', async (t) => {
  const hashes: Hex[] = [];
  for (let i = 0; i < 20; i++) hashes.push(await send());
  const waiting = hashes.map((h) => watcher.receipt([h]));
  for (let i = 0; i < 250 && count('eth_getTransactionReceipt') < 40; i++) await sleep(20);
  await sleep(300); // a dozen more rounds with nothing mined
  const before = { receipts: count('eth_getTransactionReceipt'), blocks: count('eth_getBlockReceipts') };
  await rpcCall(anvil.rpcUrl, 'evm_mine', []);
  const receipts = await Promise.all(waiting);
  t.same(
    receipts.map((r) => r?.transactionHash),
    hashes,
    'every waiter got the receipt of its own transaction',
  );
  t.ok(
    receipts.every((r) => r?.status === 'success' && r.blockNumber === receipts[0]?.blockNumber),
    'all from the one block',
  );
  t.equal(count('eth_getTransactionReceipt'), 40, 'each hash was looked up on its own when it was registered (alongside the head read, then after it), and never polled again');
  t.equal(count('eth_getBlockReceipts') - before.blocks, 1, "the block's receipts were fetched once for all twenty");
  t.equal(count('eth_getTransactionReceipt') - before.receipts, 0);
});

t.test('a transaction mined before it is awaited is found at once', async (t) => {
  const hash = await send();
  await rpcCall(anvil.rpcUrl, 'evm_mine', []);
  await rpcCall(anvil.rpcUrl, 'evm_mine', []);
  const receipt = await watcher.receipt([hash], { waitMs: 2000 });
  t.equal(receipt?.transactionHash, hash);
});

t.test('of several versions awaited together, the one that mines answers; an unmined one times out', async (t) => {
  const never = `0x${'ab'.repeat(32)}` as Hex;
  const hash = await send();
  const either = watcher.receipt([never, hash]);
  const alone = watcher.receipt([never], { waitMs: 150 });
  await sleep(50);
  await rpcCall(anvil.rpcUrl, 'evm_mine', []);
  t.equal((await either)?.transactionHash, hash);
  t.equal(await alone, undefined, 'undefined after waitMs');
});

t.test('on blocks a second apart it reads the head a few times a block, not every pollMs, and hands the receipt of the next block', async (t) => {
  const own = new Map<string, number>();
  const paced = new BlockWatcher({
    client: publicClientFor(31_337, anvil.rpcUrl, { observe: (method) => own.set(method, (own.get(method) ?? 0) + 1) }),
    pollMs: 20,
    timeoutMs: 2000,
    log,
  });
  t.teardown(() => paced.stop());
  // The node's own interval miner: steadier than a timer in this (maybe loaded) process.
  await rpcCall(anvil.rpcUrl, 'evm_setIntervalMining', [1]);
  t.teardown(() => rpcCall(anvil.rpcUrl, 'evm_setIntervalMining', [0]));
  const never = paced.receipt([`0x${'77'.repeat(32)}`], { waitMs: 9000 });
  // Four blocks to learn the chain's pace (three intervals), then counted.
  await sleep(5000);
  const counted = Date.now();
  const headsBefore = own.get('eth_blockNumber') ?? 0;
  await sleep(1000);
  const hash = await send();
  const receipt = await paced.receipt([hash], { waitMs: 5000 });
  t.equal(receipt?.transactionHash, hash, 'a transaction sent meanwhile: its receipt from the next block');
  t.equal(await never, undefined);
  const heads = (own.get('eth_blockNumber') ?? 0) - headsBefore;
  const everyPoll = Math.floor((Date.now() - counted) / 20);
  // At 20 ms it would read the head up to ~200 times in these 4 s (fewer only on a machine too slow to keep up). The
  // schedule itself is checked on a logical clock (block-pace.test.ts); here, that it engages on a real chain, with a
  // margin for a loaded machine (at load 15, 112 reads of 199 were seen while the pace was relearnt).
  t.ok(heads < everyPoll * 0.75, `${heads} head reads in ${Date.now() - counted} ms (every 20 ms: up to ${everyPoll})`);
});

const totalCalls = () => [...calls.values()].reduce((a, b) => a + b, 0);
/** Waits out calls still on the wire (a busy machine answers late): until 100 ms pass without one. */
async function quiet(): Promise<void> {
  for (let i = 0, before = -1; i < 100 && totalCalls() !== before; i++) {
    before = totalCalls();
    await sleep(100);
  }
}

t.test('idle, it makes no calls; an aborted waiter and a stopped watcher resolve undefined', async (t) => {
  t.equal(watcher.watching, 0, 'nothing awaited');
  await quiet();
  const idle = [...calls.values()].reduce((a, b) => a + b, 0);
  await sleep(300);
  t.equal(
    [...calls.values()].reduce((a, b) => a + b, 0),
    idle,
    'no RPC while nothing is awaited',
  );
  const abort = new AbortController();
  const aborted = watcher.receipt([`0x${'cd'.repeat(32)}`], { signal: abort.signal });
  const pending = watcher.receipt([`0x${'ef'.repeat(32)}`]);
  abort.abort();
  t.equal(await aborted, undefined);
  watcher.stop();
  t.equal(await pending, undefined, 'stop releases every waiter');
  t.equal(watcher.watching, 0);
  await quiet(); // a call already on the wire may still land
  const after = [...calls.values()].reduce((a, b) => a + b, 0);
  await sleep(200);
  t.equal(
    [...calls.values()].reduce((a, b) => a + b, 0),
    after,
    'and the loop has ended',
  );
  t.equal(await watcher.receipt([`0x${'12'.repeat(32)}`]), undefined, 'a stopped watcher answers at once');
});
