/**
 * The settle port: what a part that takes payments for its own goods (the stock desk) asks of the settlement
 * engine. The composition root passes the engine's `settle`; the part never sees the engine.
 */
import type { SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';

/** Verifies and settles one payment; answers like the facilitator's `/settle` (a failure is `success: false`, not a throw). */
export type SettlePort = (request: VerifyRequest) => Promise<SettleResponse>;
