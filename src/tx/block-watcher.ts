import { formatTransactionReceipt, type Chain, type Hex, type PublicClient, type TransactionReceipt, type Transport } from 'viem';
import type { Logger } from '../log/logger.ts';
import { BlockPace } from './block-pace.ts';

/** The waits before the quick rounds that follow a new hash not yet mined (then the poll interval again). */
const FOLLOW_UP_MS = [5, 15];

export interface BlockWatcherOptions {
  client: PublicClient<Transport, Chain>;
  /**
   * How often the chain head is read while some transaction is awaited (never while none is) and its block is due: on
   * a chain of steady block intervals, the watcher waits until shortly before the next block is due (`BlockPace`).
   */
  pollMs: number;
  /** Bound of every RPC call the watcher makes, on top of the client's own transport timeout. */
  timeoutMs: number;
  log: Logger;
  /** The clock the reads are timed by (ms); `Date.now` unless a test drives it. */
  now?: () => number;
}

interface Waiter {
  hashes: Hex[];
  resolve(receipt: TransactionReceipt | undefined): void;
}

/**
 * One per chain: reads the head while transactions are awaited, and hands each waiter the receipt of its
 * transaction as soon as a block holds it. A new block costs one `eth_getBlockReceipts`, however many payments ride
 * in it (or, when fewer transactions are awaited than blocks went by, one receipt lookup per awaited hash), instead
 * of every payment polling its own receipt.
 *
 * A newly awaited hash is looked up on its own in the first round after it is registered, alongside the head read:
 * it may be mined already (an automining chain mines during `eth_sendRawTransaction`; a restarted process awaits old
 * transactions). Not found, it is looked up once more after the head read, so that a miss means it lies in a later
 * block, which the following rounds scan: no block is skipped. A failed call leaves the scanned mark where it was.
 */
export class BlockWatcher {
  readonly #o: BlockWatcherOptions;
  readonly #waiters = new Map<Hex, Set<Waiter>>();
  /** Hashes not yet looked up on their own since they were registered. */
  readonly #fresh = new Set<Hex>();
  /** The last block every registered, non-fresh hash has been checked against. */
  #scanned: bigint | undefined;
  #running = false;
  #stopped = false;
  #nudged = false;
  /** Quick rounds still due because a new hash was not mined yet when first looked up. */
  #followUps = 0;
  #wake: (() => void) | undefined;
  #blockReceipts = true;
  #head: { block: bigint; atMs: number } | undefined;
  readonly #pace: BlockPace;
  readonly #now: () => number;

  constructor(opts: BlockWatcherOptions) {
    this.#o = opts;
    this.#pace = new BlockPace(opts.pollMs);
    this.#now = opts.now ?? Date.now;
  }

  /**
   * The highest block this watcher has seen (a head it read, or the block of a receipt it handed out) and when it was
   * known to be the head (`now()`; on a chain of steady blocks, up to when the next one is due); undefined before its
   * first. Others may read the head from here rather than ask the chain again.
   */
  get head(): { block: bigint; atMs: number } | undefined {
    // On a chain of steady blocks, the head read stays the head until the next block is due (reads resume then).
    if (this.#head === undefined) return undefined;
    const quietUntil = this.#pace.quietUntilMs(this.#head.block);
    if (quietUntil === undefined || quietUntil <= this.#head.atMs) return this.#head;
    return { block: this.#head.block, atMs: Math.min(this.#now(), quietUntil) };
  }

  #saw(block: bigint): void {
    if (this.#head === undefined || block >= this.#head.block) this.#head = { block, atMs: this.#now() };
  }

  /** Transactions awaited now. */
  get watching(): number {
    return this.#waiters.size;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /**
   * The receipt of whichever of `hashes` is mined first; undefined once `waitMs` has passed, `signal` aborts or the
   * watcher stops. The versions of one transaction (replacements) are awaited together: only one can mine.
   */
  receipt(hashes: readonly Hex[], opts: { signal?: AbortSignal; waitMs?: number } = {}): Promise<TransactionReceipt | undefined> {
    if (this.#stopped || opts.signal?.aborted || hashes.length === 0) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => waiter.resolve(undefined);
      const waiter: Waiter = {
        hashes: [...new Set(hashes.map((h) => h.toLowerCase() as Hex))],
        resolve: (receipt) => {
          clearTimeout(timer);
          opts.signal?.removeEventListener('abort', onAbort);
          this.#forget(waiter);
          resolve(receipt);
        },
      };
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      if (opts.waitMs !== undefined) timer = setTimeout(onAbort, opts.waitMs);
      for (const h of waiter.hashes) {
        let set = this.#waiters.get(h);
        if (!set) {
          set = new Set();
          this.#waiters.set(h, set);
          this.#fresh.add(h);
        }
        set.add(waiter);
      }
      this.nudge();
    });
  }

  /** Look now rather than after the poll interval (a transaction was just sent and may be mined already). */
  nudge(): void {
    this.#nudged = true;
    if (this.#wake) this.#wake();
    else if (!this.#running && !this.#stopped && this.#waiters.size > 0) void this.#run();
  }

  /** Ends the loop; every waiter gets undefined. */
  stop(): void {
    this.#stopped = true;
    for (const set of [...this.#waiters.values()]) for (const w of [...set]) w.resolve(undefined);
    this.#wake?.();
  }

  #forget(waiter: Waiter): void {
    for (const h of waiter.hashes) {
      const set = this.#waiters.get(h);
      if (!set) continue;
      set.delete(waiter);
      if (set.size === 0) {
        this.#waiters.delete(h);
        this.#fresh.delete(h);
      }
    }
  }

  async #run(): Promise<void> {
    this.#running = true;
    await null; // hashes registered in the same turn go in one round
    try {
      while (!this.#stopped && this.#waiters.size > 0) {
        this.#nudged = false;
        try {
          await this.#round();
        } catch (err) {
          this.#o.log.warn('block watcher round failed', { chain: this.#o.client.chain.id, error: err });
        }
        if (this.#stopped || this.#waiters.size === 0) break;
        if (!this.#nudged) await this.#sleep(this.#followUps > 0 ? Math.min(this.#o.pollMs, FOLLOW_UP_MS[FOLLOW_UP_MS.length - this.#followUps--] as number) : this.#pace.waitMs(this.#now()));
      }
    } finally {
      this.#running = false;
      // Idle: whatever is awaited next is fresh, and its own lookup covers the blocks before it.
      this.#scanned = undefined;
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  async #round(): Promise<void> {
    // A fresh hash is looked up alongside the head read: mined already (on an automining chain it is), it is
    // answered within one round trip.
    const early = [...this.#fresh];
    const startMs = this.#now();
    const [head, found] = await Promise.all([this.#call(() => this.#o.client.getBlockNumber({ cacheTime: 0 })), Promise.allSettled(early.map((hash) => this.#lookUp(hash)))]);
    if (this.#stopped) return;
    this.#saw(head);
    this.#pace.read(head, startMs, this.#now());
    const unseen: Hex[] = [];
    found.forEach((outcome, i) => {
      const hash = early[i] as Hex;
      if (outcome.status === 'fulfilled' && outcome.value) {
        this.#fresh.delete(hash);
        this.#deliver(outcome.value);
      } else unseen.push(hash);
    });
    if (early.length > 0) this.#pace.minedOnSend(unseen.length < early.length);
    // Not found by then, a fresh hash is looked up again now that the head is read: a miss then means a later block.
    const known = [...this.#waiters.keys()].filter((h) => !this.#fresh.has(h));
    const from = this.#scanned === undefined ? head + 1n : this.#scanned + 1n;
    const blocks = head >= from ? Number(head - from + 1n) : 0;
    // Scanning costs a call per block, looking up a call per hash: the cheaper of the two, both exact.
    const byHash = !this.#blockReceipts || (blocks > 0 && blocks > known.length);
    const lookUp = byHash && blocks > 0 ? [...unseen, ...known] : unseen;
    const looked = await Promise.allSettled(lookUp.map((hash) => this.#lookUp(hash)));
    let failed = false;
    looked.forEach((outcome, i) => {
      const hash = lookUp[i] as Hex;
      if (outcome.status === 'rejected') {
        failed = true;
        return;
      }
      this.#fresh.delete(hash);
      if (outcome.value) this.#deliver(outcome.value);
    });
    if (!byHash && blocks > 0) {
      const numbers = Array.from({ length: blocks }, (_, i) => from + BigInt(i));
      const scanned = await Promise.all(numbers.map((n) => this.#blockReceiptsOf(n)));
      if (scanned.includes(undefined)) return this.#round(); // no eth_getBlockReceipts here: look each hash up instead
      for (const receipts of scanned) for (const r of receipts ?? []) this.#deliver(r);
    }
    if (failed) throw new Error('a receipt lookup failed; its blocks are looked at again');
    this.#scanned = head;
    // Just sent and not mined yet: an automining chain mines it within milliseconds, so look again soon (one of steady
    // block intervals will not, and is read when its next block is due).
    if (this.#pace.intervalMs === undefined && unseen.some((h) => this.#waiters.has(h))) this.#followUps = FOLLOW_UP_MS.length;
  }

  #deliver(receipt: TransactionReceipt): void {
    const set = this.#waiters.get(receipt.transactionHash.toLowerCase() as Hex);
    if (set) this.#saw(receipt.blockNumber);
    if (set) for (const w of [...set]) w.resolve(receipt);
  }

  /** The receipt, or undefined while the transaction is not mined; throws when the node could not say. */
  async #lookUp(hash: Hex): Promise<TransactionReceipt | undefined> {
    // The raw call: viem's getTransactionReceipt throws (and builds an error) for every one not yet mined.
    const raw = await this.#call(() => this.#o.client.request({ method: 'eth_getTransactionReceipt', params: [hash] }));
    return raw ? formatTransactionReceipt(raw) : undefined;
  }

  async #blockReceiptsOf(n: bigint): Promise<TransactionReceipt[] | undefined> {
    try {
      return await this.#call(() => this.#o.client.getBlockReceipts({ blockNumber: n }));
    } catch (err) {
      const text = `${(err as { details?: string }).details ?? ''} ${(err as Error).message}`;
      if (!/method not found|not supported|does not exist|unsupported method|not available/i.test(text)) throw err;
      this.#blockReceipts = false;
      this.#o.log.warn('the node has no eth_getBlockReceipts: receipts are looked up per transaction', { chain: this.#o.client.chain.id });
      return undefined;
    }
  }

  #call<T>(fn: () => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`RPC call took longer than ${this.#o.timeoutMs} ms`)), this.#o.timeoutMs);
    });
    return Promise.race([fn(), timeout]).finally(() => clearTimeout(timer));
  }
}
