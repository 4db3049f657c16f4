/**
 * The `WWW-Authenticate: Payment …` header of an MPP challenge, written and read (see `challenge.ts` for what the
 * challenge's fields mean, and for the quoted-string escaping decision).
 */
import type { SchemaObject } from 'ajv';
import { MAX_HEADER_BYTES, describeAjvError, fail, ok, schemaCheck, type Result } from '../x402/codec.ts';
import { BASE64URL_PATTERN, RFC3339_PATTERN } from './challenge.ts';
import { PAYMENT_SCHEME, type PaymentChallenge } from './types.ts';

const METHOD_PATTERN = '^[a-z][a-z0-9:_-]*$';

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

const validateChallengeParams = schemaCheck<PaymentChallenge>(challengeParamsSchema);

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

export function authParam(name: string, value: string): string {
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
