/**
 * MPP challenges: `WWW-Authenticate: Payment id="…", realm="…", method="evm", intent="charge",
 * request="…", expires="…"[, description="…"][, digest="…"][, opaque="…"]`.
 *
 * - `request` = base64url (no padding) of the RFC 8785 canonical JSON of the {@link ChargeRequest}.
 * - `id` = base64url_nopad(HMAC-SHA256(key, realm|method|intent|request|expires|digest|opaque)), seven
 *   `|`-joined slots, an absent optional one as the empty string. This is the same binding mppx 0.11
 *   computes in `Challenge.from(…, {secretKey})` (it HMACs with the UTF-8 bytes of its string secret);
 *   mppx inserts an eighth slot only when a non-default `header` param is advertised, which we never do.
 * - Quoted-string escaping (decision, for interop with mppx's serializer/parser): `\` and `"` are
 *   backslash-escaped, and every character outside printable ASCII (controls, DEL, and anything above
 *   0x7E) is written `\uXXXX` (UTF-16 code unit), so the header value is always plain ASCII. mppx's
 *   parser decodes `\uXXXX` the same way; a raw backslash is always doubled, so this is unambiguous.
 *   Our parser accepts RFC 9110 quoted-pairs plus that `\uXXXX` form, and raw obs-text (0x80-0xFF).
 * - `expires` is RFC 3339; we emit whole seconds in UTC (`2025-01-06T12:00:00Z`).
 */
import { Buffer } from 'node:buffer';
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { SchemaObject } from 'ajv';
import { MAX_HEADER_BYTES, decodeBase64Json, describeAjvError, encodeBase64Url, fail, ok, utf8, schemaCheck, type Result } from '../x402/codec.ts';
import { err, type Err, type Failure, type Ok } from '../result.ts';
import { ADDRESS_PATTERN, UINT256_PATTERN } from '../x402/schemas.ts';
import { canonicalJson } from './canonical-json.ts';
import { CHARGE_INTENT, EVM_METHOD, type ChallengeIdFields, type ChargeRequest, type PaymentChallenge } from './types.ts';

export const RFC3339_PATTERN = '^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$';
export const BASE64URL_PATTERN = '^[A-Za-z0-9_-]+$';
const RFC3339 = new RegExp(RFC3339_PATTERN);

export const chargeRequestSchema: SchemaObject = {
  type: 'object',
  required: ['amount', 'currency', 'recipient', 'methodDetails'],
  properties: {
    amount: { type: 'string', pattern: UINT256_PATTERN, uint256: true },
    currency: { type: 'string', pattern: ADDRESS_PATTERN },
    recipient: { type: 'string', pattern: ADDRESS_PATTERN },
    methodDetails: {
      type: 'object',
      required: ['chainId', 'credentialTypes', 'decimals'],
      properties: {
        chainId: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
        credentialTypes: {
          type: 'array',
          minItems: 1,
          maxItems: 16,
          items: { type: 'string' },
          contains: { const: 'authorization' },
        },
        decimals: { type: 'integer', minimum: 0, maximum: 77 },
      },
    },
    description: { type: 'string' },
    externalId: { type: 'string' },
  },
};

const validateChargeRequest = schemaCheck<ChargeRequest>(chargeRequestSchema);

// ---------------------------------------------------------------------------------------------
// request

/** base64url_nopad(canonical JSON(request)), after schema validation. */
export function encodeRequest(request: ChargeRequest): Result<string> {
  if (!validateChargeRequest(request)) return fail('invalid_value', describeAjvError(validateChargeRequest.errors).message);
  const json = canonicalJson(request);
  return json.ok ? ok(encodeBase64Url(utf8(json.value))) : json;
}

/** Decodes the `request` auth-param into a typed charge request (unknown keys kept). */
export function decodeRequest(requestB64: string, maxChars: number = MAX_HEADER_BYTES): Result<ChargeRequest> {
  const json = decodeBase64Json(requestB64, maxChars, 'url');
  if (!json.ok) return json;
  if (validateChargeRequest(json.value)) return ok(json.value);
  return fail('invalid_shape', describeAjvError(validateChargeRequest.errors).message);
}

/** The request we put in every `evm` charge challenge. */
export function chargeRequest(params: { amount: bigint | string; currency: `0x${string}`; recipient: `0x${string}`; chainId: number; decimals?: number }): ChargeRequest {
  return {
    amount: params.amount.toString(),
    currency: params.currency,
    recipient: params.recipient,
    methodDetails: { chainId: params.chainId, credentialTypes: ['authorization'], decimals: params.decimals ?? 6 },
  };
}

// ---------------------------------------------------------------------------------------------
// id

/** The HMAC input: seven `|`-joined slots. */
export function challengeIdInput(fields: ChallengeIdFields): string {
  return [fields.realm, fields.method, fields.intent, fields.request, fields.expires, fields.digest ?? '', fields.opaque ?? ''].join('|');
}

/** base64url_nopad(HMAC-SHA256(key, realm|method|intent|request|expires|digest|opaque)). */
export function challengeId(key: Uint8Array, fields: ChallengeIdFields): string {
  return createHmac('sha256', key).update(challengeIdInput(fields), 'utf8').digest('base64url');
}

/** RFC 3339 in UTC, whole seconds. Undefined for an invalid date or a year outside 0000..9999. */
export function formatRfc3339(date: Date): string | undefined {
  const t = date.getTime();
  if (!Number.isFinite(t) || t < -62167219200000 || t > 253402300799000) return undefined;
  return new Date(Math.floor(t / 1000) * 1000).toISOString().replace(/\.000Z$/, 'Z');
}

/** Milliseconds since the epoch of an RFC 3339 timestamp, or undefined. */
export function parseRfc3339(text: string): number | undefined {
  if (typeof text !== 'string' || !RFC3339.test(text)) return undefined;
  const t = Date.parse(text);
  return Number.isFinite(t) ? t : undefined;
}

export interface CreateChallengeParams {
  realm: string;
  request: ChargeRequest;
  expires: Date;
  description?: string;
  digest?: string;
  opaque?: string;
}

/** A complete `evm`/`charge` challenge with its HMAC id. */
export function createChallenge(key: Uint8Array, params: CreateChallengeParams): Result<PaymentChallenge> {
  const request = encodeRequest(params.request);
  if (!request.ok) return request;
  const expires = formatRfc3339(params.expires);
  if (expires === undefined) return fail('invalid_value', '/expires: invalid date');
  const fields: ChallengeIdFields = {
    realm: params.realm,
    method: EVM_METHOD,
    intent: CHARGE_INTENT,
    request: request.value,
    expires,
    ...(params.digest !== undefined && { digest: params.digest }),
    ...(params.opaque !== undefined && { opaque: params.opaque }),
  };
  return ok({
    id: challengeId(key, fields),
    ...fields,
    ...(params.description !== undefined && { description: params.description }),
  });
}

// ---------------------------------------------------------------------------------------------
// verification

/** A challenge's verdict: its `code` is the MPP problem type a refusal answers with. */
export type ChallengeVerdict = Ok<void> | Err<Failure<'invalid-challenge' | 'payment-expired'>>;

/**
 * Recomputes the id of an echoed challenge (constant-time comparison), then checks that `expires` is
 * after `now` (a Date, or milliseconds since the epoch). A forged or altered challenge is
 * `invalid-challenge` even when it is also expired. The caller must still check that the decoded
 * request matches the route being paid for, and keep a consumed-set against replays.
 */
export function verifyChallenge(key: Uint8Array, echoed: ChallengeIdFields & { id: string }, now: Date | number): ChallengeVerdict {
  const expected = Buffer.from(expectedChallengeId(key, echoed), 'utf8');
  const given = Buffer.from(typeof echoed.id === 'string' ? echoed.id : '', 'utf8');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return err('invalid-challenge', 'challenge id does not match its fields');
  }
  const expires = parseRfc3339(echoed.expires);
  if (expires === undefined) return err('invalid-challenge', 'malformed expires');
  const nowMs = typeof now === 'number' ? now : now.getTime();
  if (!(expires > nowMs)) return err('payment-expired', `challenge expired at ${echoed.expires}`);
  return ok(undefined);
}

/** Characters of an HMAC-SHA256 challenge id (base64url without padding of 32 bytes). */
const MAC_CHARS = 43;
/** The longest salt a salted challenge id may carry after its HMAC. */
const MAX_SALT_CHARS = 64;

/**
 * The id a challenge with these fields must carry: its HMAC, or for a salted id (longer than an HMAC, ending in the
 * salt `opaque` ends in) the HMAC with that salt left out of `opaque`, then the salt.
 */
function expectedChallengeId(key: Uint8Array, echoed: ChallengeIdFields & { id: string }): string {
  const id = echoed.id;
  if (typeof id === 'string' && id.length > MAC_CHARS && id.length <= MAC_CHARS + MAX_SALT_CHARS && typeof echoed.opaque === 'string') {
    const salt = id.slice(MAC_CHARS);
    if (echoed.opaque.length > salt.length && echoed.opaque.endsWith(salt)) {
      return `${challengeId(key, { ...echoed, opaque: echoed.opaque.slice(0, -salt.length) })}${salt}`;
    }
  }
  return challengeId(key, echoed);
}
