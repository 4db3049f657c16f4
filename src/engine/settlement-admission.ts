/**
 * Backpressure before charging: whether a network's settlement keeps up with the payments it is given. A new payment
 * is turned away (the caller answers 503 with `Retry-After`, before verifying or settling anything) when its network
 * has too many payments waiting for their transaction to be sent, when the oldest of them has waited too long, or
 * when the network's relayers have too many transactions that the chain has not mined. Once admitted, a payment is
 * carried to its end: its latency is bounded by the queue it joined, not by how many buyers come after it.
 */

export interface AdmissionLimits {
  /** The most payments of one network between admission and their transaction's send. */
  maxQueued: number;
  /** Payments stop being admitted once the oldest queued one has waited this long for its send. */
  maxWaitMs: number;
  /** The most unmined transactions per relayer of a network before new payments wait. */
  maxTxsPerRelayer: number;
}

/** Why payments are turned away (the `reason` of the 503 and of `gate402_payments_shed_total`). */
export const SHED_REASONS = ['queue_full', 'queue_slow', 'relayers_busy'] as const;

/** Why a payment was turned away: what the 503 says, and when to come back. */
export interface Shed {
  reason: (typeof SHED_REASONS)[number];
  retryAfterSeconds: number;
}

/** One admitted payment's place in its network's queue. Both calls are idempotent. */
export interface QueueTicket {
  /** Its transaction is sent (or it ended without one): it leaves the queue. */
  sent(): void;
}

/** What the chain side of a network reports: its relayers and their transactions not yet mined. */
export interface RelayerLoad {
  relayers: number;
  unminedTxs: number;
}

class NetworkQueue {
  /** Admission time of each queued payment, oldest first (a Map keeps insertion order). */
  readonly waiting = new Map<number, number>();
  next = 0;
}

export class SettlementAdmission {
  readonly #limits: AdmissionLimits;
  readonly #queues = new Map<string, NetworkQueue>();

  constructor(limits: AdmissionLimits) {
    this.#limits = limits;
  }

  get limits(): AdmissionLimits {
    return this.#limits;
  }

  /** Payments of `network` admitted and not yet sent. */
  queued(network: string): number {
    return this.#queues.get(network)?.waiting.size ?? 0;
  }

  /** Whether a new payment of `network` must wait, and for how long; undefined when it is admitted. */
  shed(network: string, nowMs: number, load: RelayerLoad): Shed | undefined {
    const q = this.#queues.get(network);
    if (q !== undefined && q.waiting.size > 0) {
      if (q.waiting.size >= this.#limits.maxQueued) return { reason: 'queue_full', retryAfterSeconds: this.#retryAfter() };
      const oldest = q.waiting.values().next().value as number;
      if (nowMs - oldest >= this.#limits.maxWaitMs) return { reason: 'queue_slow', retryAfterSeconds: this.#retryAfter() };
    }
    if (load.relayers > 0 && load.unminedTxs >= load.relayers * this.#limits.maxTxsPerRelayer) return { reason: 'relayers_busy', retryAfterSeconds: this.#retryAfter() };
    return undefined;
  }

  /** Queues an admitted payment of `network` until its transaction is sent. */
  enter(network: string, nowMs: number): QueueTicket {
    let q = this.#queues.get(network);
    if (q === undefined) {
      q = new NetworkQueue();
      this.#queues.set(network, q);
    }
    const queue = q;
    const id = queue.next++;
    queue.waiting.set(id, nowMs);
    return { sent: () => void queue.waiting.delete(id) };
  }

  /** A queue drains within about its wait bound; a client told to come back sooner would only be turned away again. */
  #retryAfter(): number {
    return Math.max(1, Math.ceil(this.#limits.maxWaitMs / 1000));
  }
}
