import { BlockNotFoundError, TransactionReceiptNotFoundError, type Hex, type PublicClient } from 'viem';
import type { Logger } from '../log/logger.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { BroadcastOutcome, RelayerPool } from './relayer-pool.ts';
import type { SignedTx } from './trail.ts';

/**
 * Keeps what gate402 sent on chain there through a reorganisation. A mined transaction (a settlement batch, a swap,
 * a refund) is watched until it is `depth` blocks deep. While the chain only grows, that costs one head read per tick
 * and, when several blocks passed since the last one, one block read. When the head no longer descends from the head
 * seen last, every watched transaction is looked up again: one that is still mined (in the same or another block) is
 * followed at its new place; one the new chain dropped is sent again, the very same signed bytes, so it pays the same
 * payments once and takes the same relayer nonce, and the nonces behind it stop waiting. Nothing is signed anew: a
 * payment settled and served before the reorg stays one transfer.
 *
 * The watch list is durable (one record per mined transaction, removed when final), so a node restarted between a
 * reorg and its notice still sends what the new chain lacks. In a cluster each record names the node that watches it:
 * a node reads its own on start, and a node that takes over a dead node's work takes over its watch too (`adopt`), so
 * a reorg after the sender died (or while nobody watched) still has its transactions sent again.
 */

/** A watched transaction: the mined version's signed bytes, and where it was last seen mined (none: sent again, unmined). */
export interface WatchedTx {
  tx: SignedTx;
  blockNumber?: string;
  blockHash?: Hex;
  /** What the transaction stands for, for the log (e.g. `batch 0x...`). */
  about: string;
  /** The cluster node watching it (none: a single node's store). */
  node?: string;
}

export interface BlockRef {
  number: bigint;
  hash: Hex;
  parentHash: Hex;
}

export interface MinedAt {
  blockNumber: bigint;
  blockHash: Hex;
  status: 'success' | 'reverted';
}

/** The chain as the guard reads it (the subset of a public client it uses). */
export interface ReorgChain {
  head(): Promise<BlockRef>;
  /** The canonical block at `number`, or undefined when the chain is shorter. */
  blockAt(number: bigint): Promise<BlockRef | undefined>;
  /** Where the transaction is mined on the canonical chain, or undefined when it is not. */
  minedAt(hash: Hex): Promise<MinedAt | undefined>;
  broadcast(tx: SignedTx): Promise<BroadcastOutcome>;
}

/** What a reorg did to one watched transaction (counted by the metrics, told to the log). */
export const REORG_OUTCOMES = ['moved', 'resent', 'reverted_after_reorg', 'lost'] as const;
export type ReorgOutcome = (typeof REORG_OUTCOMES)[number];

export interface ReorgGuardOptions {
  chainId: number;
  chain: ReorgChain;
  /** The durable watch list (shared by every chain: keys start with the chain id). */
  watched: DurableCollection<WatchedTx>;
  /** Blocks after which a mined transaction is final and no longer watched. */
  depth: number;
  /** This cluster node's id: the records it watches are named after it. */
  node?: string;
  log: Logger;
  onOutcome?: (outcome: ReorgOutcome) => void;
}

export interface CheckReport {
  /** Whether the chain was found reorganised since the last check (or the guard had no last head). */
  reorganised: boolean;
  outcomes: Array<{ hash: Hex; outcome: ReorgOutcome }>;
  final: number;
}

const keyOf = (chainId: number, hash: Hex) => `${chainId}:${hash.toLowerCase()}`;

export class ReorgGuard {
  readonly #o: ReorgGuardOptions;
  /** Transactions watched, by key: the durable list as this process holds it. */
  readonly #watching = new Map<string, WatchedTx>();
  /**
   * Keys watched since the last look-up: their block may be gone already. A watch is handed over after the receipt
   * was read (and not awaited by the sender), so a reorg can take the block back before the guard ever holds it; the
   * heads then still descend from the last one seen, and only looking the transaction up tells it was dropped.
   */
  readonly #fresh = new Set<string>();
  #last: BlockRef | undefined;
  #loaded = false;

  constructor(opts: ReorgGuardOptions) {
    this.#o = opts;
  }

  get size(): number {
    return this.#watching.size;
  }

  /**
   * Reads this node's part of the durable watch list of this chain (a restart; a record that names no node is every
   * node's): its first check looks every transaction up.
   */
  async load(): Promise<void> {
    const own = this.#o.node;
    for await (const [key, w] of this.#o.watched.entries(`${this.#o.chainId}:`)) if (own === undefined || w.node === undefined || w.node === own) this.#watching.set(key, w);
    this.#loaded = true;
  }

  /**
   * Takes over what `node` (a dead cluster node) watched on this chain, now watched as this node's; the next check
   * looks each of them up, as a reorg may have come while nobody watched. Returns how many.
   */
  async adopt(node: string): Promise<number> {
    const taken: Array<[string, WatchedTx]> = [];
    for await (const [key, w] of this.#o.watched.entries(`${this.#o.chainId}:`)) if (w.node === node) taken.push([key, w]);
    for (const [key, w] of taken) {
      const mine = this.#own(w);
      await this.#o.watched.put(key, mine);
      this.#watching.set(key, mine);
      // Looked up at the next check, as a fresh watch is: a reorg may have dropped it while nobody watched.
      this.#fresh.add(key);
    }
    return taken.length;
  }

  /** `w` named after this node (as written to the durable list). */
  #own(w: WatchedTx): WatchedTx {
    const { node: _, ...rest } = w;
    return this.#o.node === undefined ? rest : { ...rest, node: this.#o.node };
  }

  /** Watches `tx`, mined at `at`, until it is final. Durable when it resolves. */
  async watch(tx: SignedTx, at: { blockNumber: bigint; blockHash: Hex }, about: string): Promise<void> {
    const w = this.#own({ tx, blockNumber: at.blockNumber.toString(), blockHash: at.blockHash, about });
    const key = keyOf(this.#o.chainId, tx.hash);
    await this.#o.watched.put(key, w);
    this.#watching.set(key, w);
    this.#fresh.add(key);
  }

  /**
   * One round: whether the chain still descends from the head seen last; if not (or after a restart), every watched
   * transaction is looked up and those the chain dropped are sent again; those `depth` deep are let go.
   */
  async check(): Promise<CheckReport> {
    if (!this.#loaded) await this.load();
    const report: CheckReport = { reorganised: false, outcomes: [], final: 0 };
    if (this.#watching.size === 0) {
      this.#last = undefined;
      return report;
    }
    // Taken before the head is read: a fresh transaction's block is then at or below it. Let go of only once looked
    // up (a failed check keeps them fresh).
    const fresh = new Set(this.#fresh);
    const head = await this.#o.chain.head();
    const unsent = [...this.#watching.values()].some((w) => w.blockNumber === undefined);
    report.reorganised = await this.#reorganisedSince(head);
    if (report.reorganised || unsent) await this.#recheck(report);
    else if (fresh.size > 0) await this.#recheck(report, fresh);
    // Only now: a check that failed half way through a reorg finds the reorg again at the next one.
    this.#last = head;
    for (const key of fresh) this.#fresh.delete(key);
    for (const [key, w] of this.#watching) {
      if (w.blockNumber !== undefined && head.number - BigInt(w.blockNumber) >= BigInt(this.#o.depth)) {
        await this.#o.watched.remove(key);
        this.#watching.delete(key);
        report.final++;
      }
    }
    return report;
  }

  /** True unless `head` is the last head seen or a descendant of it (the block at the last height unchanged). */
  async #reorganisedSince(head: BlockRef): Promise<boolean> {
    const last = this.#last;
    if (!last) return true;
    if (head.hash === last.hash) return false;
    if (head.number === last.number + 1n && head.parentHash === last.hash) return false;
    if (head.number <= last.number) return true;
    const there = await this.#o.chain.blockAt(last.number);
    return there?.hash !== last.hash;
  }

  /**
   * Looks every watched transaction up (or only `only`'s); sends again, in nonce order per relayer, those the chain no
   * longer has.
   */
  async #recheck(report: CheckReport, only?: ReadonlySet<string>): Promise<void> {
    const dropped: Array<[string, WatchedTx]> = [];
    for (const [key, w] of this.#watching) {
      if (only && !only.has(key)) continue;
      const at = await this.#o.chain.minedAt(w.tx.hash);
      if (at) {
        if (at.blockHash !== w.blockHash) {
          const wasUnmined = w.blockNumber === undefined;
          const moved: WatchedTx = { ...w, blockNumber: at.blockNumber.toString(), blockHash: at.blockHash };
          await this.#o.watched.put(key, moved);
          this.#watching.set(key, moved);
          const outcome: ReorgOutcome = at.status === 'reverted' ? 'reverted_after_reorg' : 'moved';
          if (!wasUnmined || outcome === 'reverted_after_reorg') this.#tell(report, w, outcome, at);
          else this.#o.log.info('a transaction the reorg dropped is mined again', { chainId: this.#o.chainId, tx: w.tx.hash, about: w.about, block: at.blockNumber.toString() });
        }
        continue;
      }
      dropped.push([key, w]);
    }
    dropped.sort(([, a], [, b]) => (a.tx.relayer === b.tx.relayer ? a.tx.nonce - b.tx.nonce : a.tx.relayer < b.tx.relayer ? -1 : 1));
    for (const [key, w] of dropped) {
      const outcome = await this.#o.chain.broadcast(w.tx);
      if (outcome === 'nonce_too_low' && !(await this.#o.chain.minedAt(w.tx.hash))) {
        // Its nonce went to another transaction of this relayer: these bytes can never mine again.
        await this.#o.watched.remove(key);
        this.#watching.delete(key);
        this.#tell(report, w, 'lost', undefined, outcome);
        continue;
      }
      if (w.blockNumber !== undefined) {
        const unmined = this.#own({ tx: w.tx, about: w.about });
        await this.#o.watched.put(key, unmined);
        this.#watching.set(key, unmined);
        this.#tell(report, w, 'resent', undefined, outcome);
      }
    }
  }

  #tell(report: CheckReport, w: WatchedTx, outcome: ReorgOutcome, at?: MinedAt, sent?: BroadcastOutcome): void {
    report.outcomes.push({ hash: w.tx.hash, outcome });
    this.#o.onOutcome?.(outcome);
    const fields = { chainId: this.#o.chainId, tx: w.tx.hash, about: w.about, from: w.blockNumber, to: at?.blockNumber.toString(), broadcast: sent };
    if (outcome === 'moved') this.#o.log.warn('a reorg moved a mined transaction to another block', fields);
    else if (outcome === 'resent') this.#o.log.warn('a reorg dropped a mined transaction: sent the same signed transaction again', fields);
    else if (outcome === 'reverted_after_reorg') this.#o.log.error('a transaction re-mined after a reorg reverted: what it settled was served and is not paid', fields);
    else this.#o.log.error('a transaction the reorg dropped cannot be sent again (its nonce was taken): what it settled was served and is not paid', fields);
  }
}

/** Checks every `intervalMs` until `signal` aborts; a failed check is logged and tried again at the next tick. */
export async function guardUntil(guard: ReorgGuard, intervalMs: number, signal: AbortSignal, log: Logger, sleep: (ms: number, signal: AbortSignal) => Promise<void>): Promise<void> {
  while (!signal.aborted) {
    try {
      await guard.check();
    } catch (err) {
      log.warn('could not check the chain for a reorg', { error: err });
    }
    await sleep(intervalMs, signal);
  }
}

/** The chain as a viem public client reads it, and the relayer pool that sends. */
export function reorgChainOf(client: Pick<PublicClient, 'getBlock' | 'getTransactionReceipt'>, pool: Pick<RelayerPool, 'broadcast'>): ReorgChain {
  const ref = (b: { number: bigint | null; hash: Hex | null; parentHash: Hex }): BlockRef => ({ number: b.number ?? 0n, hash: b.hash ?? '0x', parentHash: b.parentHash });
  return {
    head: async () => ref(await client.getBlock({ blockTag: 'latest' })),
    blockAt: (number) =>
      client.getBlock({ blockNumber: number }).then(
        (b) => ref(b),
        (err: unknown) => {
          if (err instanceof BlockNotFoundError) return undefined;
          throw err;
        },
      ),
    minedAt: (hash) =>
      client.getTransactionReceipt({ hash }).then(
        (r) => ({ blockNumber: r.blockNumber, blockHash: r.blockHash, status: r.status }),
        (err: unknown) => {
          if (err instanceof TransactionReceiptNotFoundError) return undefined;
          throw err;
        },
      ),
    broadcast: (tx) => pool.broadcast(tx),
  };
}
