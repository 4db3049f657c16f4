/**
 * One breaker per key (a merchant, a facilitator). After `threshold` consecutive failures it opens for `openMs`:
 * callers are turned away before they pay, not failed after. Then one trial is let through (half-open); its outcome
 * closes or re-opens the breaker. The clock is injected.
 *
 * `admit` hands out a ticket, the only way to report an outcome or to give an admission back, and released once by
 * its holder (as `SettlementAdmission.enter` hands out its queue tickets): the half-open trial belongs to the ticket
 * that took it, so another request's release can never clear it, and two trials never run at once.
 *
 * A failure counts once per paid credential: after a failed upstream call the buyer may send the same credential
 * again (it is not charged twice), and a buyer whose input makes the upstream fail could otherwise replay one
 * payment until the breaker opens for everybody. A credential that has already failed neither counts nor re-opens
 * the breaker when it fails again; it only gives back the trial it held.
 */
export type BreakerState = 'closed' | 'open' | 'half-open';

/** Failed credentials remembered per key until its next success; the oldest is forgotten beyond this. */
const REMEMBERED_FAILURES = 256;

/** An admission: its holder reports the outcome (`success`, `failure`) or gives it back (`release`), once. */
export interface BreakerTicket {
  /** Whether this admission is the half-open trial. */
  readonly trial: boolean;
  /** The call succeeded: the breaker closes. Ends the ticket. */
  success(): void;
  /** The call paid by `credential` (a payment's nonce key) failed. Ends the ticket. */
  failure(credential: string): void;
  /** Ends the ticket without an outcome (refused, unpaid, aborted, failed before the call). Safe to call again. */
  release(): void;
}

interface Breaker {
  failures: number;
  openedAt?: number;
  /** The ticket holding the half-open trial, if one does. */
  trial?: object;
  /** Credentials whose call failed since the last success, oldest first. */
  failed: Set<string>;
}

export class CircuitBreakers {
  readonly #threshold: number;
  readonly #openMs: number;
  readonly #now: () => number;
  /** Only keys that failed since their last success (a success deletes the entry). */
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

  /** An admission to call (and be paid for) now, or undefined when open. In half-open, only one trial at a time. */
  admit(key: string): BreakerTicket | undefined {
    const state = this.state(key);
    if (state === 'open') return undefined;
    const s = this.#state.get(key);
    if (state === 'half-open') {
      if (!s || s.trial !== undefined) return undefined;
      const token = {};
      s.trial = token;
      return this.#ticket(key, token);
    }
    return this.#ticket(key, undefined);
  }

  /** Seconds until an open breaker lets a trial through. */
  retryAfterSeconds(key: string): number {
    const s = this.#state.get(key);
    if (!s || s.openedAt === undefined) return 0;
    return Math.max(1, Math.ceil((this.#openMs - (this.#now() - s.openedAt)) / 1000));
  }

  /** Whether `admit` would admit a request now (an unpaid request asks this and takes no admission). */
  admits(key: string): boolean {
    const state = this.state(key);
    return state === 'closed' || (state === 'half-open' && this.#state.get(key)?.trial === undefined);
  }

  #ticket(key: string, token: object | undefined): BreakerTicket {
    return new Ticket(key, token, this.#ended);
  }

  /** A ticket ends: it gives back the trial only if it holds it, then reports its outcome, if any. */
  readonly #ended: TicketEnd = (key, token, outcome) => {
    const s = this.#state.get(key);
    if (token !== undefined && s?.trial === token) s.trial = undefined;
    if (outcome === 'success') this.#state.delete(key);
    else if (outcome !== undefined) this.#failed(key, outcome.failed);
  };

  #failed(key: string, credential: string): void {
    let s = this.#state.get(key);
    if (!s) {
      s = { failures: 0, failed: new Set() };
      this.#state.set(key, s);
    }
    if (s.failed.has(credential)) return;
    s.failed.add(credential);
    if (s.failed.size > REMEMBERED_FAILURES) s.failed.delete(s.failed.values().next().value as string);
    s.failures += 1;
    if (s.failures >= this.#threshold || s.openedAt !== undefined) s.openedAt = this.#now();
  }
}

/** How a ticket ended: with a success, a failure paid by a credential, or no outcome (released). */
type Outcome = 'success' | { failed: string } | undefined;
type TicketEnd = (key: string, token: object | undefined, outcome: Outcome) => void;

class Ticket implements BreakerTicket {
  readonly trial: boolean;
  readonly #key: string;
  readonly #token: object | undefined;
  readonly #end: TicketEnd;
  #ended = false;

  constructor(key: string, token: object | undefined, end: TicketEnd) {
    this.trial = token !== undefined;
    this.#key = key;
    this.#token = token;
    this.#end = end;
  }

  success(): void {
    this.#close('success');
  }

  failure(credential: string): void {
    this.#close({ failed: credential });
  }

  release(): void {
    this.#close(undefined);
  }

  #close(outcome: Outcome): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#end(this.#key, this.#token, outcome);
  }
}
