/**
 * Backpressure before charging: whether a network's settlement keeps up with the payments it is given. A new payment
 * is turned away (the caller answers 503 with `Retry-After`, before verifying or settling anything) when its network
 * has too many payments waiting for their transaction to be sent, when the oldest of them has waited too long, or
 * when the network's relayers have too many transactions that the chain has not mined. Once admitted, a payment is
 * carried to its end: its latency is bounded by the queue it joined, not by how many buyers come after it.
 *
 * The queue is shared fairly: each client (the request's address, see `http/ip.ts`) has a share of it. A client may
 * go beyond its share only while the queue keeps a share's worth of room for everyone else; past that it is turned
 * away (`client_share`), so one client's flood never fills the queue the others need.
 */
import type { Shed } from '../ports/settlement.ts';

export interface AdmissionLimits {
  /** The most payments of one network between admission and their transaction's send. */
  maxQueued: number;
  /** Payments stop being admitted once the oldest queued one has waited this long for its send. */
  maxWaitMs: number;
  /** The most unmined transactions per relayer of a network before new payments wait. */
  maxTxsPerRelayer: number;
  /** The payments of one client a network's queue holds once it is nearly full (default {@link defaultClientShare}). */
  clientShare?: number;
}

/** A client's share of a queue of `maxQueued`, unless configured: an eighth of it, at least 2. */
export function defaultClientShare(maxQueued: number): number {
  return Math.max(2, Math.floor(maxQueued / 8));
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
  /** Queued payments per client (only clients with some). */
  readonly byClient = new Map<string, number>();
  next = 0;
}

export class SettlementAdmission {
  readonly #limits: AdmissionLimits;
  readonly #queues = new Map<string, NetworkQueue>();
  readonly #share: number;

  constructor(limits: AdmissionLimits) {
    this.#limits = limits;
    this.#share = limits.clientShare ?? defaultClientShare(limits.maxQueued);
  }

  /** The payments of one client a network's queue holds once it is nearly full. */
  get clientShare(): number {
    return this.#share;
  }

  /** Payments of `network` that `client` has queued. */
  queuedBy(network: string, client: string): number {
    return this.#queues.get(network)?.byClient.get(client) ?? 0;
  }

  get limits(): AdmissionLimits {
    return this.#limits;
  }

  /** Payments of `network` admitted and not yet sent. */
  queued(network: string): number {
    return this.#queues.get(network)?.waiting.size ?? 0;
  }

  /**
   * Whether a new payment of `network` (from `client`, when known) must wait, and for how long; undefined when it is
   * admitted.
   */
  shed(network: string, nowMs: number, load: RelayerLoad, client?: string): Shed | undefined {
    const q = this.#queues.get(network);
    if (q !== undefined && q.waiting.size > 0) {
      if (q.waiting.size >= this.#limits.maxQueued) return { reason: 'queue_full', retryAfterSeconds: this.#retryAfter() };
      const share = this.shareShed(network, client);
      if (share !== undefined) return share;
      const oldest = q.waiting.values().next().value as number;
      if (nowMs - oldest >= this.#limits.maxWaitMs) return { reason: 'queue_slow', retryAfterSeconds: this.#retryAfter() };
    }
    if (load.relayers > 0 && load.unminedTxs >= load.relayers * this.#limits.maxTxsPerRelayer) return { reason: 'relayers_busy', retryAfterSeconds: this.#retryAfter() };
    return undefined;
  }

  /**
   * Whether `client` is at its share of `network`'s queue while the queue has no more than a share's worth of room
   * left: then its new payment waits (`client_share`), and the room is kept for the other clients.
   */
  shareShed(network: string, client: string | undefined): Shed | undefined {
    if (client === undefined) return undefined;
    const q = this.#queues.get(network);
    if (q === undefined) return undefined;
    const own = q.byClient.get(client) ?? 0;
    if (own < this.#share || q.waiting.size + this.#share < this.#limits.maxQueued) return undefined;
    return { reason: 'client_share', retryAfterSeconds: this.#retryAfter() };
  }

  /** Queues an admitted payment of `network` (from `client`, when known) until its transaction is sent. */
  enter(network: string, nowMs: number, client?: string): QueueTicket {
    let q = this.#queues.get(network);
    if (q === undefined) {
      q = new NetworkQueue();
      this.#queues.set(network, q);
    }
    const queue = q;
    const id = queue.next++;
    queue.waiting.set(id, nowMs);
    if (client !== undefined) queue.byClient.set(client, (queue.byClient.get(client) ?? 0) + 1);
    return {
      sent: () => {
        if (!queue.waiting.delete(id) || client === undefined) return;
        const left = (queue.byClient.get(client) ?? 1) - 1;
        if (left > 0) queue.byClient.set(client, left);
        else queue.byClient.delete(client);
      },
    };
  }

  /** A queue drains within about its wait bound; a client told to come back sooner would only be turned away again. */
  #retryAfter(): number {
    return Math.max(1, Math.ceil(this.#limits.maxWaitMs / 1000));
  }
}
