/**
 * What the facilitator's HTTP layer (`http-app.ts`) needs from the facilitator engine. The engine implements
 * it; the HTTP layer only moves bytes and statuses.
 */
import type { SupportedResponse } from '../protocol/x402/types.ts';

export type { SupportedResponse };

/** A status and a JSON-serialisable body, sent as `application/json`. */
export interface ServiceAnswer {
  status: number;
  body: unknown;
  /** Extra response headers (`Retry-After` of a 503). */
  headers?: Record<string, string>;
}

export interface FacilitatorService {
  /** `GET /supported`: `{kinds: [{x402Version: 2, scheme: 'exact', network}], extensions: [], signers: {'eip155:*': [addresses]}}`. */
  supported(): SupportedResponse;
  /**
   * `POST /verify`. Receives the raw request body (at most the configured limit, content type already checked
   * to be JSON) and decodes it itself. Answers `200 {isValid: true, payer}`, `200 {isValid: false, invalidReason, ...}`
   * or `400 {error}` for a malformed body.
   */
  verify(body: Uint8Array): Promise<ServiceAnswer>;
  /**
   * `POST /settle`: like `verify`; `200` with a `SettleResponse`, or `400 {error}`. `client`: the caller's address
   * (its rate-limit key), whose share of the settlement queue is bounded.
   */
  settle(body: Uint8Array, client?: string): Promise<ServiceAnswer>;
  /** `GET /health`: 200 when `ok`, else 503; `details` are returned either way. */
  health(): Promise<{ ok: boolean; details: Record<string, unknown> }>;
}
