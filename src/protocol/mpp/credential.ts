/**
 * MPP credentials: `Authorization: Payment <token>`, method `evm`, credential type `authorization`.
 *
 * What mppx 0.11 actually sends (read from `node_modules/mppx/dist`: `evm/client/Charge.js`,
 * `Credential.js`, `evm/Types.js`, `client/internal/protocols/Shared.js`):
 * - Header: `Authorization: Payment <token>` (exactly one space; `Credential.serialize`). The client
 *   replaces an existing `Authorization` only when it starts with `Payment `. The server side
 *   (`Credential.deserialize`) matches `^Payment\s+(.+)$` case-insensitively.
 * - `<token>` = base64url WITHOUT padding of `JSON.stringify({challenge, payload, source})` (plain
 *   JSON.stringify, not canonical).
 * - `challenge` echoes the parsed challenge: `id, realm, method, intent, expires` (+ `description`,
 *   `digest`, `opaque` when present; `header` only for a non-Authorization credential header) and
 *   `request` RE-SERIALIZED by mppx as base64url_nopad(RFC 8785 canonical JSON of the decoded request).
 *   So the echoed `request` equals ours byte for byte only because ours is canonical too.
 *   `opaque` is a base64url string (very old mppx versions sent an object; we reject that as malformed).
 * - `source` = `did:pkh:eip155:<chainId>:<checksummed payer address>`.
 * - `payload` = `{from, nonce, signature, to, type: "authorization", validAfter, validBefore, value}`:
 *   `from`/`to` checksummed addresses (`to` = request.recipient); `value` = request.amount (the same
 *   decimal string); `validAfter` = `"0"`; `validBefore` = floor(Date(challenge.expires)/1000) as a
 *   decimal string (or now+300 s when the challenge has no `expires`); `nonce` =
 *   keccak256(utf8(challenge.id + challenge.realm)) as 0x-hex bytes32; `signature` = the 65-byte EIP-712
 *   signature of `TransferWithAuthorization(from,to,value,validAfter,validBefore,nonce)` over the domain
 *   `{name, version, chainId: request.methodDetails.chainId, verifyingContract: request.currency}`
 *   (name/version configured in the client: the token's EIP-712 domain).
 * - The client refuses a challenge whose `methodDetails.credentialTypes` lacks `"authorization"`, or
 *   that carries `methodDetails.splits`.
 * - mppx's own server validates the same payload fields as strings matching `^\d+$` (amounts),
 *   `^0x[0-9a-fA-F]{40}$` (addresses), `^0x[0-9a-fA-F]{64}$` (nonce), `^0x[0-9a-fA-F]+$` (signature).
 *
 * Our parser accepts exactly that: the payload object is closed (those eight keys), numbers must be
 * canonical decimals below 2^256, and the echoed challenge must be `evm`/`charge` with every field we
 * issue (`id, realm, method, intent, request, expires`); unknown keys in `challenge` and at the top
 * level are tolerated. A padded token (`=`) is tolerated too.
 */
import type { SchemaObject } from 'ajv';
import { keccak256, stringToBytes } from 'viem';
import { MAX_HEADER_BYTES, MAX_SIGNATURE_BYTES, decodeBase64Json, describeAjvError, encodeBase64Url, fail, ok, utf8, schemaCheck, type Result } from '../x402/codec.ts';
import { ADDRESS_PATTERN, BYTES32_PATTERN, SIGNATURE_PATTERN, UINT256_PATTERN } from '../x402/schemas.ts';
import { BASE64URL_PATTERN, RFC3339_PATTERN } from './challenge.ts';
import { CHARGE_INTENT, EVM_METHOD, type HexString, type PaymentCredential } from './types.ts';

export const SOURCE_PATTERN = '^did:pkh:eip155:[1-9][0-9]{0,15}:0x[0-9a-fA-F]{40}$';

const address: SchemaObject = { type: 'string', pattern: ADDRESS_PATTERN };
const uint256: SchemaObject = { type: 'string', pattern: UINT256_PATTERN, uint256: true };

export const authorizationPayloadSchema: SchemaObject = {
  type: 'object',
  required: ['type', 'from', 'to', 'value', 'validAfter', 'validBefore', 'nonce', 'signature'],
  additionalProperties: false,
  properties: {
    type: { type: 'string', const: 'authorization' },
    from: address,
    to: address,
    value: uint256,
    validAfter: uint256,
    validBefore: uint256,
    nonce: { type: 'string', pattern: BYTES32_PATTERN },
    signature: { type: 'string', maxLength: 2 + 2 * MAX_SIGNATURE_BYTES, pattern: SIGNATURE_PATTERN },
  },
};

export const credentialSchema: SchemaObject = {
  type: 'object',
  required: ['challenge', 'payload'],
  properties: {
    challenge: {
      type: 'object',
      required: ['id', 'realm', 'method', 'intent', 'request', 'expires'],
      properties: {
        method: { type: 'string', const: EVM_METHOD },
        intent: { type: 'string', const: CHARGE_INTENT },
        id: { type: 'string', minLength: 1, maxLength: 512 },
        realm: { type: 'string', maxLength: 1024 },
        request: { type: 'string', pattern: BASE64URL_PATTERN },
        expires: { type: 'string', pattern: RFC3339_PATTERN },
        description: { type: 'string' },
        digest: { type: 'string' },
        opaque: { type: 'string' },
      },
    },
    source: { type: 'string', pattern: SOURCE_PATTERN },
    payload: authorizationPayloadSchema,
  },
};

const validateCredential = schemaCheck<PaymentCredential>(credentialSchema);

const SCHEME_PREFIX = /^[ \t]*payment(?:[ \t]|$)/i;
const CREDENTIAL = /^[ \t]*payment[ \t]+([A-Za-z0-9_-]+={0,2})[ \t]*$/i;

/**
 * Parses an `Authorization` header value carrying a `Payment` credential. Codes: `too_large`,
 * `missing_scheme` (not a `Payment` credential), `not_base64`, `not_json`, `unsupported_method`
 * (challenge method/intent other than `evm`/`charge`), `invalid_shape` (path of the failing field).
 */
export function parseAuthorizationPayment(headerValue: string, maxChars: number = MAX_HEADER_BYTES): Result<PaymentCredential> {
  if (typeof headerValue !== 'string') return fail('missing_scheme', 'not a string');
  if (headerValue.length > maxChars) return fail('too_large', `longer than ${maxChars} characters`);
  if (!SCHEME_PREFIX.test(headerValue)) return fail('missing_scheme', 'not a Payment credential');
  const m = CREDENTIAL.exec(headerValue);
  if (!m?.[1]) return fail('not_base64', 'credential is not a single base64url token');
  const json = decodeBase64Json(m[1], maxChars, 'url');
  if (!json.ok) return json;
  if (validateCredential(json.value)) return ok(json.value);
  const d = describeAjvError(validateCredential.errors);
  if ((d.path === '/challenge/method' || d.path === '/challenge/intent') && d.keyword === 'const') {
    return fail('unsupported_method', `${d.path}: only ${EVM_METHOD}/${CHARGE_INTENT} is supported`);
  }
  return fail('invalid_shape', d.message);
}

/** Serializes a credential the way mppx does (for clients and tests): `Payment <base64url_nopad(JSON)>`. */
export function formatAuthorizationPayment(credential: PaymentCredential): string {
  return `Payment ${encodeBase64Url(utf8(JSON.stringify(credential)))}`;
}

/** The EIP-3009 nonce that binds an authorization to its challenge: keccak256(utf8(id + realm)). */
export function expectedAuthorizationNonce(id: string, realm: string): HexString {
  return keccak256(stringToBytes(id + realm));
}

/** True when `source` is `did:pkh:eip155:<chainId>:<address>` for this chain and address (address case-insensitive). */
export function sourceMatches(source: string, chainId: number, address: string): boolean {
  return new RegExp(SOURCE_PATTERN).test(source) && source.toLowerCase() === `did:pkh:eip155:${chainId}:${address}`.toLowerCase();
}
