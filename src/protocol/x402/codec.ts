/**
 * Shared plumbing for the pure protocol codecs (x402 and MPP): the result type and error codes (from `../result.ts`),
 * size limits, strict base64/base64url, UTF-8 JSON parsing and the Ajv instance factory.
 *
 * Contract of every decoder in `src/protocol/x402` and `src/protocol/mpp`: it never throws; it returns
 * `{ ok: true, value }` or `{ ok: false, error: { code, message } }` with `code` one of {@link CodecErrorCode}.
 */
import { Buffer } from 'node:buffer';
import { Ajv, type ErrorObject, type SchemaObject, type ValidateFunction } from 'ajv';
import { isAddress } from 'viem';
import { fail, ok, type Result } from '../result.ts';

export { fail, ok, type CodecError, type CodecErrorCode, type Result } from '../result.ts';

/** Largest accepted header value, in characters (every header we read is ASCII: base64 or auth-params). */
export const MAX_HEADER_BYTES = 16 * 1024;
/** Default largest accepted facilitator request body, in bytes. */
export const MAX_BODY_BYTES = 64 * 1024;
/** Largest accepted signature hex (bytes); room for ERC-6492 / ERC-1271 wrapped signatures. */
export const MAX_SIGNATURE_BYTES = 4096;

// ---------------------------------------------------------------------------------------------
// Base64

const STANDARD_B64 = /^[A-Za-z0-9+/]*={0,2}$/;
const URL_B64 = /^[A-Za-z0-9_-]*={0,2}$/;

/**
 * Decodes base64 text into bytes, or undefined when it is not base64.
 * Accepts the standard alphabet and the url-safe alphabet (not mixed), with or without `=` padding;
 * padding, when present, must complete the last quantum. Rejects whitespace, empty input and a length of
 * 4n+1 (which cannot be base64). Non-zero trailing bits are tolerated (the JSON is validated anyway).
 */
export function decodeBase64(text: string, alphabet: 'standard' | 'url' | 'either'): Uint8Array | undefined {
  if (text.length === 0) return undefined;
  const std = alphabet !== 'url' && STANDARD_B64.test(text);
  const url = !std && alphabet !== 'standard' && URL_B64.test(text);
  if (!std && !url) return undefined;
  const body = text.replace(/=+$/, '');
  const padding = text.length - body.length;
  if (body.length % 4 === 1) return undefined;
  if (padding > 0 && (body.length + padding) % 4 !== 0) return undefined;
  return new Uint8Array(Buffer.from(body, std ? 'base64' : 'base64url'));
}

/** Standard base64 with `=` padding. */
export function encodeBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

/** base64url without padding (RFC 4648 section 5). */
export function encodeBase64Url(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64url');
}

export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Parses UTF-8 JSON bytes; never throws. */
export function parseJsonBytes(bytes: Uint8Array): Result<unknown> {
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    return fail('not_json', 'invalid UTF-8');
  }
  return parseJsonText(text);
}

/** Parses JSON text; never throws (a stack overflow on absurd nesting is reported as `not_json` too). */
export function parseJsonText(text: string): Result<unknown> {
  try {
    return ok(JSON.parse(text) as unknown);
  } catch (e) {
    return fail('not_json', e instanceof SyntaxError ? e.message : 'unparseable JSON');
  }
}

/** Decodes base64 (either alphabet) UTF-8 JSON, rejecting input over `maxChars` first. */
export function decodeBase64Json(text: unknown, maxChars: number, alphabet: 'standard' | 'url' | 'either'): Result<unknown> {
  if (typeof text !== 'string') return fail('not_base64', 'not a string');
  if (text.length > maxChars) return fail('too_large', `longer than ${maxChars} characters`);
  const bytes = decodeBase64(text, alphabet);
  if (!bytes) return fail('not_base64', alphabet === 'url' ? 'not base64url' : 'not base64');
  return parseJsonBytes(bytes);
}

/** Byte length of a body given as bytes or as a string (UTF-8), with a cheap early exit for big strings. */
export function bodyTooLarge(body: Uint8Array | string, maxBytes: number): boolean {
  if (typeof body !== 'string') return body.byteLength > maxBytes;
  if (body.length > maxBytes) return true; // UTF-8 never has fewer bytes than UTF-16 code units
  return Buffer.byteLength(body, 'utf8') > maxBytes;
}

// ---------------------------------------------------------------------------------------------
// Ajv

/** A check made by {@link schemaCheck}: a type guard that leaves why its last call failed in `errors`. */
export interface SchemaCheck<T> {
  (data: unknown): data is T;
  readonly errors: ErrorObject[] | null | undefined;
}

let sharedAjv: Ajv | undefined;

/**
 * A check of `schema`, compiled at its first call on the one strict Ajv instance every codec shares. A process
 * pays for the schemas it uses, once: each Ajv instance compiles the JSON Schema meta-schema again (~50 ms), and
 * a gateway or facilitator used to compile every codec's schemas while starting, most of which a given process
 * never checks a value against. Side by side, start to healthy: a gateway 3.14 -> 2.87 CPU s, a facilitator 3.45 -> 2.98.
 */
export function schemaCheck<T>(schema: SchemaObject): SchemaCheck<T> {
  let compiled: ValidateFunction<T> | undefined;
  const check = (data: unknown): data is T => {
    if (!compiled) {
      sharedAjv ??= createAjv();
      compiled = sharedAjv.compile<T>(schema);
    }
    return compiled(data);
  };
  return Object.defineProperty(check, 'errors', { get: () => compiled?.errors }) as SchemaCheck<T>;
}

/** A strict Ajv instance with the `uint256` keyword (decimal string strictly below 2^256). */
function createAjv(): Ajv {
  const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: false });
  ajv.addKeyword({
    keyword: 'uint256',
    type: 'string',
    schemaType: 'boolean',
    errors: false,
    validate: (enabled: boolean, data: string) => !enabled || isUint256Decimal(data),
  });
  ajv.addKeyword({
    keyword: 'eip55',
    type: 'string',
    schemaType: 'boolean',
    errors: false,
    validate: (enabled: boolean, data: string) => !enabled || isEip55Address(data),
  });
  return ajv;
}

/**
 * A 20-byte hex address whose letters are all one case, or whose mixed case is its EIP-55 checksum: a mistyped
 * checksummed address is refused as malformed rather than read as another address (or thrown on by an encoder).
 */
export function isEip55Address(text: string): boolean {
  const hex = text.slice(2);
  return isAddress(text, { strict: hex !== hex.toUpperCase() });
}

const TWO_256 = 1n << 256n;
const DECIMAL = /^(0|[1-9][0-9]{0,77})$/;

/** A canonical decimal string (no sign, no leading zero) of a value in [0, 2^256). */
export function isUint256Decimal(text: string): boolean {
  return DECIMAL.test(text) && BigInt(text) < TWO_256;
}

/** The first Ajv error as a field path and a reason. */
export function describeAjvError(errors: ErrorObject[] | null | undefined): { path: string; keyword: string; message: string } {
  const e = errors?.[0];
  if (!e) return { path: '/', keyword: 'unknown', message: '/: invalid' };
  let path = e.instancePath;
  const params = e.params as Record<string, unknown>;
  if (e.keyword === 'required' && typeof params.missingProperty === 'string') path += `/${params.missingProperty}`;
  if (e.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string') path += `/${params.additionalProperty}`;
  const reason =
    e.keyword === 'required'
      ? 'is required'
      : e.keyword === 'additionalProperties'
        ? 'is not allowed'
        : e.keyword === 'uint256'
          ? 'must be a decimal integer below 2^256'
          : (e.message ?? 'is invalid');
  return { path: path || '/', keyword: e.keyword, message: `${path || '/'}: ${reason}` };
}

/** Runs a compiled validator and turns its first error into an `invalid_shape` result. */
export function validateWith<T>(validate: SchemaCheck<T>, value: unknown): Result<T> {
  if (validate(value)) return ok(value);
  return fail('invalid_shape', describeAjvError(validate.errors).message);
}
