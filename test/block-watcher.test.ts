import t from 'tap';
import { createPublicClient, custom, parseEther, type Hex } from 'viem';
import { startAnvil } from '../src/devnet/anvil.ts';
import { BlockWatcher, type WatcherClock } from '../src/tx/block-watcher.ts';
import { chainFor, publicClientFor } from '../src/chain/clients.ts';
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

/** The watcher's time, moved by the test: its timers run in order of their time, the clock set to each in turn. */
class LogicalClock implements WatcherClock {
  #now = 0;
  #ids = 0;
  readonly #timers = new Map<number, { at: number; fn: () => void }>();
  now(): number {
    return this.#now;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    this.#timers.set(++this.#ids, { at: this.#now + Math.max(0, ms), fn });
    return this.#ids;
  }
  clearTimeout(id: unknown): void {
    this.#timers.delete(id as number);
  }
  /** When the earliest timer is due (Infinity when none is). */
  nextAt(): number {
    return Math.min(...[...this.#timers.values()].map((x) => x.at));
  }
  /** Moves the clock to the earliest timer and runs it. */
  runNext(): void {
    const [id, timer] = [...this.#timers].reduce((a, b) => (b[1].at < a[1].at ? b : a));
    this.#timers.delete(id);
    this.#now = Math.max(this.#now, timer.at);
    timer.fn();
  }
  set(time: number): void {
    this.#now = Math.max(this.#now, time);
  }
}

t.test('waiting on a 1 s chain (a logical clock): at most 3 calls per block, each block seen within 1/16 of a block time', async (t) => {
  const clock = new LogicalClock();
  const paced = new Map<string, number>();
  let inFlight = 0;
  // The same chain, through a transport that counts the calls and knows when none is on the wire.
  const client = createPublicClient({
    chain: chainFor(31_337, anvil.rpcUrl),
    transport: custom({
      async request({ method, params }: { method: string; params?: unknown[] }) {
        paced.set(method, (paced.get(method) ?? 0) + 1);
        inFlight++;
        try {
          return await rpcCall(anvil.rpcUrl, method, params ?? []);
        } finally {
          inFlight--;
        }
      },
    }),
  });
  const w = new BlockWatcher({ client, pollMs: 20, timeoutMs: 60_000, log, clock });
  t.teardown(() => w.stop());
  /** Until the watcher's calls are answered and it waits on the clock again. */
  async function settle(): Promise<void> {
    for (let quiet = 0; quiet < 5; ) {
      await new Promise((r) => setImmediate(r));
      quiet = inFlight === 0 ? quiet + 1 : 0;
    }
  }
  // Blocks one second apart by their timestamps, and from now one every 1,000 ms of the clock, at 370 ms past.
  await rpcCall(anvil.rpcUrl, 'anvil_mine', ['0x41', '0x1']);
  let timestamp = BigInt((await rpcCall<{ timestamp: Hex }>(anvil.rpcUrl, 'eth_getBlockByNumber', ['latest', false])).timestamp);
  const minedAt = new Map<bigint, number>();
  let nextBlock = 370;
  let seen = -1n;
  const lateness: number[] = [];
  async function runUntil(until: number): Promise<void> {
    for (;;) {
      const at = Math.min(clock.nextAt(), nextBlock);
      if (at > until) break;
      if (nextBlock <= clock.nextAt()) {
        clock.set(nextBlock);
        await rpcCall(anvil.rpcUrl, 'evm_setNextBlockTimestamp', [Number(++timestamp)]);
        minedAt.set(BigInt(await rpcCall<Hex>(anvil.rpcUrl, 'evm_mine', []).then(() => rpcCall<Hex>(anvil.rpcUrl, 'eth_blockNumber', []))), nextBlock);
        nextBlock += 1000;
      } else {
        clock.runNext();
        await settle();
      }
      const head = w.head?.block ?? -1n;
      if (head > seen && minedAt.has(head)) lateness.push(clock.now() - (minedAt.get(head) as number));
      seen = head;
    }
    clock.set(until);
  }

  const never = w.receipt([`0x${'77'.repeat(32)}`]);
  await settle();
  await runUntil(10_000);
  t.equal(w.blockMs, 1000, 'the block time, from the timestamps');
  const before = new Map(paced);
  lateness.length = 0;
  await runUntil(30_000);
  const during = Object.fromEntries([...paced].map(([m, n]) => [m, n - (before.get(m) ?? 0)]));
  const total = Object.values(during).reduce((a, b) => a + b, 0);
  t.ok(total <= 3 * 20, `${total} calls over 20 blocks of waiting: ${JSON.stringify(during)} (at a fixed 20 ms poll: over 1,000)`);
  t.equal(during.eth_getBlockReceipts, 20, "each block's receipts fetched once");
  t.equal(lateness.length, 20, 'every block seen');
  t.ok(Math.max(...lateness) <= 1000 / 16, `each seen at most ${Math.max(...lateness)} ms (logical) after it was mined`);

  // A transaction sent now is awaited like any other: handed over at the next block's first read.
  const hash = await send();
  const sentAt = clock.now();
  let gotAt: number | undefined;
  const receipt = w.receipt([hash]).then((r) => {
    gotAt = clock.now();
    return r;
  });
  await settle();
  await runUntil(32_000);
  t.equal((await receipt)?.status, 'success', 'its receipt');
  t.ok(gotAt !== undefined && gotAt - 30_370 <= 1000 / 16, `handed over ${(gotAt ?? 0) - sentAt} ms after the send, for a block mined 370 ms after it`);
  w.stop();
  t.equal(await never, undefined);
});
