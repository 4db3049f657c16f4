import { LRUCache } from 'lru-cache';
import type { Address } from 'viem';
import type { Balance, PayerRef } from './payer-reservations.ts';

/** What reading payers' balances needs from one chain (a viem public client and the chain's block watcher). */
export interface BalanceChain {
  /** The chain head, read now. */
  blockNumber(): Promise<bigint>;
  /** The head the chain's block watcher saw last, and when (ms); undefined when it has seen none. */
  watchedHead(): { block: bigint; atMs: number } | undefined;
  balanceOf(token: Address, owner: Address, block: bigint): Promise<bigint>;
}

/** How many payers' balances are kept (the least recently used dropped first). */
export const BALANCE_CACHE_ENTRIES = 10_000;

/**
 * Payers' token balances, read at most once per block per payer: the head is taken from the block watcher when it
 * read one lately, else read (at most once per `headTtlMs`, one read shared by every caller); a balance is read at
 * that block, once, and kept until the head moves. Bounded: a flood of payers keeps at most
 * {@link BALANCE_CACHE_ENTRIES} balances.
 */
export class PayerBalances {
  readonly #chain: (network: string) => BalanceChain;
  readonly #headTtlMs: number;
  readonly #clock: () => number;
  readonly #heads = new Map<string, { block: bigint; atMs: number; reading?: Promise<bigint> }>();
  readonly #balances = new LRUCache<string, { block: bigint; value: Promise<bigint> }>({ max: BALANCE_CACHE_ENTRIES });

  constructor(opts: { chain(network: string): BalanceChain; headTtlMs: number; clock?: () => number }) {
    this.#chain = opts.chain;
    this.#headTtlMs = opts.headTtlMs;
    this.#clock = opts.clock ?? Date.now;
  }

  /** The head of `network` as last known, read no more than `maxAgeMs` (default `headTtlMs`) ago (by the watcher or here). */
  head(network: string, maxAgeMs: number = this.#headTtlMs): Promise<bigint> {
    const now = this.#clock();
    const own = this.#heads.get(network);
    const watched = this.#chain(network).watchedHead();
    const fresh = [own, watched].filter((h): h is { block: bigint; atMs: number } => h !== undefined && now - h.atMs < maxAgeMs && h.block >= 0n);
    if (fresh.length > 0) return Promise.resolve(fresh.reduce((a, b) => (b.block > a.block ? b : a)).block);
    if (own?.reading) return own.reading;
    const reading = this.#chain(network)
      .blockNumber()
      .then((block) => {
        this.#heads.set(network, { block, atMs: this.#clock() });
        return block;
      })
      .catch((err: unknown) => {
        this.#heads.delete(network);
        throw err;
      });
    this.#heads.set(network, { block: own?.block ?? -1n, atMs: -Infinity, reading });
    return reading;
  }

  /** The highest block known of `network` now, without reading anything (by which a transfer seen mined is on chain). */
  knownHead(network: string): bigint | undefined {
    const own = this.#heads.get(network)?.block;
    const watched = this.#chain(network).watchedHead()?.block;
    if (own === undefined || own < 0n) return watched;
    return watched !== undefined && watched > own ? watched : own;
  }

  /** `payer`'s balance at `block`, if it was read already (or is being read); undefined otherwise. */
  cached(payer: PayerRef, block: bigint): Promise<Balance> | undefined {
    const hit = this.#balances.get(keyOf(payer));
    return hit && hit.block === block ? hit.value.then((value) => ({ block, value })) : undefined;
  }

  /** Whether a balance of `payer` is kept (read at some block): a payer whose signature was checked once. */
  known(payer: PayerRef): boolean {
    return this.#balances.has(keyOf(payer));
  }

  /** `payer`'s balance at `block`: read once for that block, however many ask. */
  balance(payer: PayerRef, block: bigint): Promise<Balance> {
    const key = keyOf(payer);
    const hit = this.#balances.get(key);
    if (hit && hit.block === block) return hit.value.then((value) => ({ block, value }));
    const value = this.#chain(payer.network).balanceOf(payer.token as Address, payer.payer as Address, block);
    const entry = { block, value };
    this.#balances.set(key, entry);
    // A failed read is not kept: the next payment reads again.
    value.catch(() => {
      if (this.#balances.get(key) === entry) this.#balances.delete(key);
    });
    return value.then((v) => ({ block, value: v }));
  }
}

const keyOf = (p: PayerRef): string => `${p.network}|${p.token.toLowerCase()}|${p.payer.toLowerCase()}`;
