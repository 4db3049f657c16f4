/**
 * The settle port: what a part that takes payments (the paywall, the stock desk) asks of whatever settles them: the
 * gateway's own engine, or remote facilitators (`settlement/remote/`). The composition root picks; the part never
 * sees which.
 */
import type { SettleResponse, VerifyRequest, VerifyResponse } from '../protocol/x402/types.ts';

/** Verifies and settles one payment; answers like the facilitator's `/settle` (a failure is `success: false`, not a throw). */
export type SettlePort = (request: VerifyRequest) => Promise<SettleResponse>;

/** Checks one payment without settling it; answers like the facilitator's `/verify`. */
export type VerifyPort = (request: VerifyRequest) => Promise<VerifyResponse>;
