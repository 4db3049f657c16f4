/**
 * RFC 8785 (JSON Canonicalization Scheme), written by `canonicalize` (by one of the RFC's authors): object keys
 * sorted by UTF-16 code units, no whitespace, numbers as ECMAScript Number::toString (so `-0` is `0` and `1e21`
 * stays `1e+21`), strings as JSON.stringify escapes them.
 *
 * Before it is written, a value is checked to be the JSON this project signs: plain objects, arrays, strings, finite
 * numbers, booleans and null, nested at most {@link MAX_CANONICAL_DEPTH} deep. Object members whose value is
 * `undefined` are skipped and `undefined` array elements become null (as JSON.stringify does). Anything else
 * (bigint, NaN/Infinity, functions, symbols, class instances such as Date, lone surrogates) gives an `invalid_value`
 * result; nothing throws.
 */
import canonicalize from 'canonicalize';
import { fail, ok, type Result } from '../result.ts';

export const MAX_CANONICAL_DEPTH = 64;

/** Why `value` is not plain JSON, or `undefined` when it is (strings and numbers are checked by the writer). */
function notJson(value: unknown, depth: number): string | undefined {
  if (depth > MAX_CANONICAL_DEPTH) return 'nesting too deep';
  if (value === null || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return undefined;
  if (typeof value !== 'object') return `${typeof value} is not JSON`;
  if (Array.isArray(value)) {
    for (const element of value) {
      const why = element === undefined ? undefined : notJson(element, depth + 1);
      if (why) return why;
    }
    return undefined;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return 'not a plain object';
  for (const member of Object.values(value)) {
    const why = member === undefined ? undefined : notJson(member, depth + 1);
    if (why) return why;
  }
  return undefined;
}

/** The RFC 8785 canonical JSON text of `value`. */
export function canonicalJson(value: unknown): Result<string> {
  const why = notJson(value, 0);
  if (why) return fail('invalid_value', why);
  try {
    // Keys are written as strings too: a key with a lone surrogate throws like a value with one.
    return ok(canonicalize(value) as string);
  } catch (err) {
    return fail('invalid_value', err instanceof Error ? err.message : String(err));
  }
}
