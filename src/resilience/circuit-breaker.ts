/**
 * One breaker per merchant. After `threshold` consecutive upstream failures it opens for `openMs`: buyers get
 * 503 before they pay, not 502 after. Then one trial request is let through (half-open); its outcome closes or
 * re-opens the breaker. The clock is injected.
 *
 * A failure counts once per paid credential: after a failed upstream call the buyer may send the same credential
 * again (it is not charged twice), and a buyer whose input makes the upstream fail could otherwise replay one
 * payment until the breaker opens for everybody. A credential that has already failed neither counts nor re-opens
 * the breaker when it fails again; it only gives back the trial it held.
 */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** Failed credentials remembered per merchant until its next success; the oldest is forgotten beyond this. */
const REMEMBERED_FAILURES = 256;

interface Breaker {
  failures: number;
  openedAt?: number;
  trial: boolean;
  /** Credentials whose upstream call failed since the last success, oldest first. */
  failed: Set<string>;
}

export class CircuitBreakers {
  readonly #threshold: number;
  readonly #openMs: number;
  readonly #now: () => number;
  /** Only merchants that failed since their last success (a success deletes the entry). */
  readonly #state = new Map<string, Breaker>();

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

  /**
   * Undo an admission that never reached the upstream (refused, unpaid, aborted, failed before the call). Safe to
   * call more than once, and after {@link success} or {@link failure}.
   */
  release(key: string): void {
    const s = this.#state.get(key);
    if (s) s.trial = false;
  }

  success(key: string): void {
    this.#state.delete(key);
  }

  /** An upstream call paid by `credential` (a payment's nonce key) failed. */
  failure(key: string, credential: string): void {
    let s = this.#state.get(key);
    if (!s) {
      s = { failures: 0, trial: false, failed: new Set() };
      this.#state.set(key, s);
    }
    s.trial = false;
    if (s.failed.has(credential)) return;
    s.failed.add(credential);
    if (s.failed.size > REMEMBERED_FAILURES) s.failed.delete(s.failed.values().next().value as string);
    s.failures += 1;
    if (s.failures >= this.#threshold || s.openedAt !== undefined) s.openedAt = this.#now();
  }

  /** Seconds until an open breaker lets a trial through. */
  retryAfterSeconds(key: string): number {
    const s = this.#state.get(key);
    if (!s || s.openedAt === undefined) return 0;
    return Math.max(1, Math.ceil((this.#openMs - (this.#now() - s.openedAt)) / 1000));
  }
}
