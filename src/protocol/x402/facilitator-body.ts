/**
 * Facilitator HTTP bodies (JSON, UTF-8): the `POST /verify` and `POST /settle` requests
 * `{x402Version: 2, paymentPayload, paymentRequirements}` and the three answers.
 *
 * A body is given as bytes or as an already-decoded string; anything over `maxBytes` (default
 * {@link MAX_BODY_BYTES}) is `too_large` before parsing. A UTF-8 BOM is not accepted (`not_json`).
 */
import { MAX_BODY_BYTES, bodyTooLarge, fail, parseJsonBytes, parseJsonText, type Result } from './codec.ts';
import { validateFacilitatorRequest, validateSettleResponse, validateSupportedResponse, validateVerifyResponse } from './schemas.ts';
import type { SettleResponse, SupportedResponse, VerifyRequest, VerifyResponse } from './types.ts';

function decodeBody<T>(body: Uint8Array | string, maxBytes: number, validate: (v: unknown) => Result<T>): Result<T> {
  if (typeof body !== 'string' && !(body instanceof Uint8Array)) return fail('not_json', 'body is neither bytes nor text');
  if (bodyTooLarge(body, maxBytes)) return fail('too_large', `body over ${maxBytes} bytes`);
  const json = typeof body === 'string' ? parseJsonText(body) : parseJsonBytes(body);
  return json.ok ? validate(json.value) : json;
}

/** Parses the body of `POST /verify` or `POST /settle`. */
export function decodeFacilitatorRequest(body: Uint8Array | string, maxBytes: number = MAX_BODY_BYTES): Result<VerifyRequest> {
  return decodeBody(body, maxBytes, validateFacilitatorRequest);
}

/** Parses a `/verify` answer (for a gateway talking to a remote facilitator). */
export function decodeVerifyResponse(body: Uint8Array | string, maxBytes: number = MAX_BODY_BYTES): Result<VerifyResponse> {
  return decodeBody(body, maxBytes, validateVerifyResponse);
}

/** Parses a `/settle` answer. */
export function decodeSettleResponse(body: Uint8Array | string, maxBytes: number = MAX_BODY_BYTES): Result<SettleResponse> {
  return decodeBody(body, maxBytes, validateSettleResponse);
}

/** Parses a `/supported` answer. */
export function decodeSupportedResponse(body: Uint8Array | string, maxBytes: number = MAX_BODY_BYTES): Result<SupportedResponse> {
  return decodeBody(body, maxBytes, validateSupportedResponse);
}

/** Serializes any facilitator request or answer (plain `JSON.stringify`; the types hold only JSON values). */
export function encodeFacilitatorBody(value: VerifyRequest | VerifyResponse | SettleResponse | SupportedResponse): string {
  return JSON.stringify(value);
}
