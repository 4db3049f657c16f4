import { ok } from '../protocol/result.ts';
import type { StoreFailure, StoreHealth } from './store.ts';
import type { Err } from '../protocol/result.ts';

/**
 * The store's health from its writes: unhealthy while the last durable write failed, and for `failureMemoryMs`
 * after any write failed. Both stores keep one.
 */
export class WriteHealth {
  /** The current run of failed writes, if the last write failed. */
  #failing: { error: string; since: number } | undefined;
  /** The last failure, remembered for `failureMemoryMs`. */
  #lastFailure: { error: string; since: number; at: number } | undefined;
  #probedAt = 0;
  readonly #memoryMs: number;

  constructor(failureMemoryMs = 60_000) {
    this.#memoryMs = failureMemoryMs;
  }

  succeeded(): void {
    this.#failing = undefined;
  }

  failed(err: unknown): void {
    this.#failing ??= { error: err instanceof Error ? err.message : String(err), since: Date.now() };
    this.#lastFailure = { ...this.#failing, at: Date.now() };
  }

  get failing(): boolean {
    return this.#failing !== undefined;
  }

  /** True at most once a second while failing: time to try a probe write. */
  probeDue(): boolean {
    if (this.#failing === undefined || Date.now() - this.#probedAt < 1000) return false;
    this.#probedAt = Date.now();
    return true;
  }

  health(): StoreHealth {
    if (this.#failing !== undefined) return unwritable(this.#failing);
    if (this.#lastFailure !== undefined && Date.now() - this.#lastFailure.at < this.#memoryMs) return unwritable(this.#lastFailure);
    return ok(undefined);
  }
}

const unwritable = (failure: { error: string; since: number }): Err<StoreFailure> => ({ ok: false, error: { code: 'store_unwritable', message: failure.error, since: failure.since } });
