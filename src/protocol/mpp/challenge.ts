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
import { MAX_HEADER_BYTES, createAjv, decodeBase64Json, describeAjvError, encodeBase64Url, fail, ok, utf8, type Result } from '../x402/codec.ts';
import { err, type Err, type Failure, type Ok } from '../result.ts';
import { ADDRESS_PATTERN, UINT256_PATTERN } from '../x402/schemas.ts';
import { canonicalJson } from './canonical-json.ts';
import { CHARGE_INTENT, EVM_METHOD, PAYMENT_SCHEME, type ChallengeIdFields, type ChargeRequest, type PaymentChallenge } from './types.ts';

export const RFC3339_PATTERN = '^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$';
export const BASE64URL_PATTERN = '^[A-Za-z0-9_-]+$';
const RFC3339 = new RegExp(RFC3339_PATTERN);
const METHOD_PATTERN = '^[a-z][a-z0-9:_-]*$';

const ajv = createAjv();

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

/** The auth-params of one `Payment` challenge (names lower-cased; unknown params are tolerated and dropped). */
const challengeParamsSchema: SchemaObject = {
  type: 'object',
  required: ['id', 'realm', 'method', 'intent', 'request', 'expires'],
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 512 },
    realm: { type: 'string', maxLength: 1024 },
    method: { type: 'string', pattern: METHOD_PATTERN, maxLength: 64 },
    intent: { type: 'string', pattern: METHOD_PATTERN, maxLength: 64 },
    request: { type: 'string', pattern: BASE64URL_PATTERN },
    expires: { type: 'string', pattern: RFC3339_PATTERN },
    description: { type: 'string' },
    digest: { type: 'string', pattern: '^sha-256=' },
    opaque: { type: 'string' },
  },
  additionalProperties: { type: 'string' },
};

const validateChargeRequest = ajv.compile<ChargeRequest>(chargeRequestSchema);
const validateChallengeParams = ajv.compile<PaymentChallenge>(challengeParamsSchema);

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

// ---------------------------------------------------------------------------------------------
// WWW-Authenticate

/** Printable ASCII but `"` and `\`: written as it is. */
const PLAIN_QUOTED = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

function escapeQuoted(value: string): string {
  if (PLAIN_QUOTED.test(value)) return value;
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x22 || c === 0x5c) out += `\\${value[i]}`;
    else if (c < 0x20 || c > 0x7e) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += value[i];
  }
  return out;
}

function authParam(name: string, value: string): string {
  return `${name}="${escapeQuoted(value)}"`;
}

/** One `Payment …` challenge, for a `WWW-Authenticate` header (send several as repeated headers). */
export function formatWwwAuthenticate(challenge: PaymentChallenge): string {
  const parts = [
    authParam('id', challenge.id),
    authParam('realm', challenge.realm),
    authParam('method', challenge.method),
    authParam('intent', challenge.intent),
    authParam('request', challenge.request),
    authParam('expires', challenge.expires),
  ];
  if (challenge.description !== undefined) parts.push(authParam('description', challenge.description));
  if (challenge.digest !== undefined) parts.push(authParam('digest', challenge.digest));
  if (challenge.opaque !== undefined) parts.push(authParam('opaque', challenge.opaque));
  return `${PAYMENT_SCHEME} ${parts.join(', ')}`;
}

/**
 * What the challenges of one route share within one `expires` second, worked out once: the HMAC input up to the
 * `digest` slot and the header text between `id` and `digest`. {@link issueFromTemplate} then adds what differs per
 * challenge (its `digest` and `opaque`) for the cost of one HMAC and a few concatenations.
 */
export interface ChallengeTemplate {
  readonly fields: Omit<PaymentChallenge, 'id' | 'digest' | 'opaque'>;
  /** `realm|method|intent|request|expires|` */
  readonly idInputHead: string;
  /** `, realm="…", method="…", intent="…", request="…", expires="…"[, description="…"]` */
  readonly headerMiddle: string;
}

export function challengeTemplate(params: Omit<CreateChallengeParams, 'digest' | 'opaque'>): Result<ChallengeTemplate> {
  const made = createChallenge(new Uint8Array(0), params);
  if (!made.ok) return made;
  const { id: _id, ...fields } = made.value;
  const head = formatWwwAuthenticate({ ...made.value, id: '' });
  return ok({
    fields,
    idInputHead: challengeIdInput({ ...fields, digest: '', opaque: '' }).slice(0, -1),
    headerMiddle: head.slice(`${PAYMENT_SCHEME} id=""`.length),
  });
}

/** Characters of an HMAC-SHA256 challenge id (base64url without padding of 32 bytes). */
const MAC_CHARS = 43;
/** The longest salt a salted challenge id may carry after its HMAC. */
const MAX_SALT_CHARS = 64;

/**
 * The HMAC part of a salted challenge id: the id of the template's challenge with this `digest` and `opaque` set to
 * `opaqueHead` (the part of `opaque` before the salt). The same for every challenge of one template, digest and head,
 * so a caller may keep it for as long as the template lives.
 */
export function templateMac(key: Uint8Array, template: ChallengeTemplate, digest: string | undefined, opaqueHead: string): string {
  return createHmac('sha256', key)
    .update(`${template.idInputHead}${digest ?? ''}|${opaqueHead}`, 'utf8')
    .digest('base64url');
}

/**
 * One challenge from a template, salted: `opaque` is `opaqueHead` then `salt`, and the id is `mac` (from
 * {@link templateMac}) then the same salt. Every slot but the salt is under the HMAC; the salt only makes each
 * challenge (and so each EIP-3009 nonce, keccak256(id + realm)) distinct, and choosing it gains nothing, since every
 * challenge still needs its own payment. So a challenge costs no HMAC of its own. Returns the id and the
 * `WWW-Authenticate` value (as {@link formatWwwAuthenticate} writes it).
 */
export function issueFromTemplate(template: ChallengeTemplate, mac: string, binding: { digest?: string; opaqueHead: string; salt: string }): { id: string; header: string } {
  const id = `${mac}${binding.salt}`;
  let header = `${PAYMENT_SCHEME} id="${id}"${template.headerMiddle}`;
  if (binding.digest !== undefined) header += `, ${authParam('digest', binding.digest)}`;
  header += `, ${authParam('opaque', `${binding.opaqueHead}${binding.salt}`)}`;
  return { id, header };
}

/**
 * The fixed parts of the `WWW-Authenticate` value of a salted challenge without a digest, around its two fillers: the
 * id, then `opaque` (both base64url, so written unescaped): as {@link issueFromTemplate} writes it.
 */
export function saltedHeaderParts(template: ChallengeTemplate): [string, string, string] {
  return [`${PAYMENT_SCHEME} id="`, `"${template.headerMiddle}, opaque="`, '"'];
}

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

interface RawChallenge {
  scheme: string;
  params: Array<[string, string]>;
  token68?: string;
}

const TOKEN = /[!#$%&'*+\-.^_`|~0-9A-Za-z]+/y;
const TOKEN_VALUE = /[!#$%&'*+\-.^_`|~0-9A-Za-z/=:]+/y;
const TOKEN68 = /[A-Za-z0-9\-._~+/]+=*(?=[ \t]*(?:,|$))/y;
const HEX4 = /^[0-9A-Fa-f]{4}$/;

function isWs(c: string | undefined): boolean {
  return c === ' ' || c === '\t';
}

/** Reads a quoted-string whose opening quote is just before `start`. */
function readQuoted(s: string, start: number): { value: string; end: number } | undefined {
  let out = '';
  let seg = start;
  let i = start;
  while (i < s.length) {
    const c = s.charCodeAt(i);
    if (c === 0x22) return { value: out + s.slice(seg, i), end: i + 1 };
    if (c === 0x5c) {
      out += s.slice(seg, i);
      const next = s[i + 1];
      if (next === undefined) return undefined;
      const hex = s.slice(i + 2, i + 6);
      if (next === 'u' && HEX4.test(hex)) {
        out += String.fromCharCode(Number.parseInt(hex, 16));
        i += 6;
      } else {
        const n = next.charCodeAt(0);
        if ((n < 0x20 && n !== 0x09) || n === 0x7f) return undefined;
        out += next;
        i += 2;
      }
      seg = i;
      continue;
    }
    if ((c < 0x20 && c !== 0x09) || c === 0x7f) return undefined;
    i++;
  }
  return undefined;
}

/** Splits a `WWW-Authenticate` value into challenges (RFC 9110 section 11.6.1 grammar). */
function tokenize(s: string): Result<RawChallenge[]> {
  const list: RawChallenge[] = [];
  let current: RawChallenge | undefined;
  let i = 0;
  for (;;) {
    while (i < s.length && (isWs(s[i]) || s[i] === ',')) i++;
    if (i >= s.length) break;
    TOKEN.lastIndex = i;
    const m = TOKEN.exec(s);
    if (!m) return fail('invalid_syntax', `unexpected character at offset ${i}`);
    const name = m[0];
    i = TOKEN.lastIndex;
    let j = i;
    while (isWs(s[j])) j++;
    if (s[j] === '=') {
      if (!current || current.token68 !== undefined) return fail('invalid_syntax', `parameter ${name} outside a challenge`);
      i = j + 1;
      while (isWs(s[i])) i++;
      let value: string;
      if (s[i] === '"') {
        const q = readQuoted(s, i + 1);
        if (!q) return fail('invalid_syntax', `bad quoted-string for ${name}`);
        value = q.value;
        i = q.end;
      } else {
        TOKEN_VALUE.lastIndex = i;
        const v = TOKEN_VALUE.exec(s);
        if (!v) return fail('invalid_syntax', `missing value for ${name}`);
        value = v[0];
        i = TOKEN_VALUE.lastIndex;
      }
      while (isWs(s[i])) i++;
      if (i < s.length && s[i] !== ',') return fail('invalid_syntax', `expected "," at offset ${i}`);
      current.params.push([name.toLowerCase(), value]);
      continue;
    }
    current = { scheme: name, params: [] };
    list.push(current);
    if (j >= s.length || s[j] === ',') {
      i = j;
      continue;
    }
    if (j === i) return fail('invalid_syntax', `unexpected character at offset ${i}`);
    i = j;
    TOKEN68.lastIndex = i;
    const t = TOKEN68.exec(s);
    if (t) {
      current.token68 = t[0];
      i = TOKEN68.lastIndex;
    }
  }
  return ok(list);
}

function toChallenge(raw: RawChallenge, index: number): Result<PaymentChallenge> {
  const where = `Payment challenge #${index + 1}`;
  if (raw.token68 !== undefined) return fail('invalid_syntax', `${where}: token68 form instead of parameters`);
  const seen = new Map<string, string>();
  for (const [name, value] of raw.params) {
    if (seen.has(name)) return fail('duplicate_parameter', `${where}: duplicate parameter ${name}`);
    seen.set(name, value);
  }
  const params: unknown = Object.fromEntries(seen);
  if (!validateChallengeParams(params)) {
    const d = describeAjvError(validateChallengeParams.errors);
    const name = d.path.replace(/^\//, '');
    if (d.keyword === 'required') return fail('missing_parameter', `${where}: missing parameter ${name}`);
    return fail('invalid_parameter', `${where}: ${d.message}`);
  }
  const p = params;
  return ok({
    id: p.id,
    realm: p.realm,
    method: p.method,
    intent: p.intent,
    request: p.request,
    expires: p.expires,
    ...(p.description !== undefined && { description: p.description }),
    ...(p.digest !== undefined && { digest: p.digest }),
    ...(p.opaque !== undefined && { opaque: p.opaque }),
  });
}

/**
 * All `Payment` challenges of a `WWW-Authenticate` value (several may share one value, possibly mixed
 * with other schemes, which are skipped). Any malformed `Payment` challenge fails the whole value.
 * `id`, `realm`, `method`, `intent`, `request` and `expires` are required.
 */
export function parseWwwAuthenticate(header: string, maxChars: number = MAX_HEADER_BYTES): Result<PaymentChallenge[]> {
  if (typeof header !== 'string') return fail('invalid_syntax', 'not a string');
  if (header.length > maxChars) return fail('too_large', `longer than ${maxChars} characters`);
  const raw = tokenize(header);
  if (!raw.ok) return raw;
  const out: PaymentChallenge[] = [];
  const payments = raw.value.filter((c) => c.scheme.toLowerCase() === PAYMENT_SCHEME.toLowerCase());
  if (payments.length === 0) return fail('missing_scheme', 'no Payment challenge');
  for (const [index, c] of payments.entries()) {
    const ch = toChallenge(c, index);
    if (!ch.ok) return ch;
    out.push(ch.value);
  }
  return ok(out);
}
