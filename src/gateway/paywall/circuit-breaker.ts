/**
 * One breaker per merchant. After `threshold` consecutive upstream failures it opens for `openMs`: buyers get
 * 503 before they pay, not 502 after. Then one trial request is let through (half-open); its outcome closes or
 * re-opens the breaker. The clock is injected.
 */
export type BreakerState = 'closed' | 'open' | 'half-open';

export class CircuitBreakers {
  readonly #threshold: number;
  readonly #openMs: number;
  readonly #now: () => number;
  readonly #state = new Map<string, { failures: number; openedAt?: number; trial: boolean }>();

  constructor(opts: { threshold?: number; openMs?: number; now?: () => number } = {}) {
    this.#threshold = opts.threshold ?? 5;
    this.#openMs = opts.openMs ?? 30_000;
    this.#now = opts.now ?? Date.now;
  }

  state(key: string): BreakerState {
    const s = this.#state.get(key);
    if (!s || s.openedAt === undefined) return 'closed';
    return this.#now() - s.openedAt >= this.#openMs ? 'half-open' : 'open';
  }

  /** Whether a request may go (and be paid for) now. In half-open, only one trial at a time. */
  admit(key: string): boolean {
    const state = this.state(key);
    if (state === 'closed') return true;
    if (state === 'open') return false;
    const s = this.#state.get(key);
    if (!s || s.trial) return false;
    s.trial = true;
    return true;
  }

  /** Undo an admission that never reached the upstream (the payment failed first). */
  release(key: string): void {
    const s = this.#state.get(key);
    if (s) s.trial = false;
  }

  success(key: string): void {
    this.#state.delete(key);
  }

  failure(key: string): void {
    const s = this.#state.get(key) ?? { failures: 0, trial: false };
    s.failures += 1;
    s.trial = false;
    if (s.failures >= this.#threshold || s.openedAt !== undefined) s.openedAt = this.#now();
    this.#state.set(key, s);
  }

  /** Seconds until an open breaker lets a trial through. */
  retryAfterSeconds(key: string): number {
    const s = this.#state.get(key);
    if (!s || s.openedAt === undefined) return 0;
    return Math.max(1, Math.ceil((this.#openMs - (this.#now() - s.openedAt)) / 1000));
  }
}
