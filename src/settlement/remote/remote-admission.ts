/**
 * Backpressure of a gateway that settles through remote facilitators, on its own counts: the engine's queue sees
 * none of these payments, so its shedding says nothing about them. Per network, at most `maxInFlight` remote
 * settlements run at once, and one client (the request's address) holds at most `clientMaxInFlight` of them; a new
 * payment past either bound is turned away (503, Retry-After) before any facilitator is called. A facilitator that
 * hangs then holds a bounded number of the gateway's requests, never all of them.
 */
import type { Shed } from '../../ports/settlement.ts';

export interface RemoteAdmissionLimits {
  /** Remote settlements in flight per network. */
  maxInFlight: number;
  /** Remote settlements in flight per client address, per network. */
  clientMaxInFlight: number;
  /** What a turned-away buyer is told to wait. */
  retryAfterSeconds: number;
}

export const DEFAULT_REMOTE_ADMISSION: RemoteAdmissionLimits = { maxInFlight: 128, clientMaxInFlight: 16, retryAfterSeconds: 1 };

/** A place taken by one remote settlement: released once, by its holder, when the settlement is over. */
export interface RemoteTicket {
  release(): void;
}

export class RemoteAdmission {
  readonly #limits: RemoteAdmissionLimits;
  /** Per network: remote settlements in flight, in all and per client. Entries at zero are removed (bounded). */
  readonly #networks = new Map<string, { total: number; clients: Map<string, number> }>();

  constructor(limits: RemoteAdmissionLimits) {
    this.#limits = limits;
  }

  /** Remote settlements in flight now, on every network. */
  get inFlight(): number {
    let total = 0;
    for (const n of this.#networks.values()) total += n.total;
    return total;
  }

  /** Why a new payment on `network` from `client` must be turned away now, or undefined when it may go on. */
  shedding(network: string, client: string | undefined): Shed | undefined {
    const n = this.#networks.get(network);
    if (!n) return undefined;
    if (n.total >= this.#limits.maxInFlight) return { reason: 'queue_full', retryAfterSeconds: this.#limits.retryAfterSeconds };
    if (client !== undefined && (n.clients.get(client) ?? 0) >= this.#limits.clientMaxInFlight) return { reason: 'client_share', retryAfterSeconds: this.#limits.retryAfterSeconds };
    return undefined;
  }

  /** Takes a place for a payment on `network` from `client`, or says why there is none. */
  enter(network: string, client: string | undefined): { ticket: RemoteTicket } | { shed: Shed } {
    const shed = this.shedding(network, client);
    if (shed) return { shed };
    const n = this.#networks.get(network) ?? { total: 0, clients: new Map<string, number>() };
    this.#networks.set(network, n);
    n.total++;
    if (client !== undefined) n.clients.set(client, (n.clients.get(client) ?? 0) + 1);
    let released = false;
    return {
      ticket: {
        release: () => {
          if (released) return;
          released = true;
          n.total--;
          if (client !== undefined) {
            const left = (n.clients.get(client) ?? 1) - 1;
            if (left > 0) n.clients.set(client, left);
            else n.clients.delete(client);
          }
          if (n.total === 0) this.#networks.delete(network);
        },
      },
    };
  }
}
