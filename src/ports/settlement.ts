/**
 * The settlement port: what a part that takes payments (the paywall, the stock desk) asks of whatever settles them:
 * the gateway's own engine (`engine/`), or remote facilitators (`settlement/remote/`). The composition root picks;
 * the part never sees which. Every answer is an answer (a refusal is `isValid: false` / `success: false`), never a
 * throw.
 */
import type { SettleResponse, SupportedResponse, VerifyRequest, VerifyResponse } from '../protocol/x402/types.ts';

/** Why payments are turned away for backpressure (the `reason` of the 503 and of `gate402_payments_shed_total`). */
export const SHED_REASONS = ['queue_full', 'queue_slow', 'relayers_busy', 'client_share', 'payer_over_balance'] as const;

export type ShedReason = (typeof SHED_REASONS)[number];

/**
 * `errorReason` of a settle answer that turned a payment away for backpressure (`client_share` decided at the queue's
 * door, after the early check): nothing was charged, the same payment may come again after `extra.retryAfterSeconds`.
 */
export const SETTLEMENT_SHED = 'settlement_shed';

/** Why a payment was turned away: what the 503 says, and when to come back. */
export interface Shed {
  reason: ShedReason;
  retryAfterSeconds: number;
}

/** Verifies and settles one payment; answers like the facilitator's `/settle` (a failure is `success: false`, not a throw). */
export type SettlePort = (request: VerifyRequest, client?: string) => Promise<SettleResponse>;

/** Checks one payment without settling it; answers like the facilitator's `/verify`. */
export type VerifyPort = (request: VerifyRequest) => Promise<VerifyResponse>;

/** Everything a paying part asks of settlement. */
export interface Settlement {
  /** Checks one payment without settling it. */
  verify: VerifyPort;
  /**
   * Verifies and settles one payment; `client` is the request's address, whose share of the settlement queue is
   * bounded. An answer with `errorReason` {@link SETTLEMENT_SHED} turned it away for backpressure (nothing charged).
   */
  settle: SettlePort;
  /**
   * Whether a new payment must be turned away now because settlement is behind, or because `client` holds its share:
   * asked before the credential is verified or settled, so the 503 it gets charged nothing.
   */
  shedding(request: VerifyRequest, client?: string): Promise<Shed | undefined>;
  /** The payment kinds this settlement takes. */
  supported(): SupportedResponse;
}
