/**
 * RFC 8785 (JSON Canonicalization Scheme) for the JSON subset we produce: plain objects (keys sorted
 * by UTF-16 code units, no whitespace), arrays, strings, finite numbers (ECMAScript Number::toString,
 * so `-0` is `0` and `1e21` stays `1e+21`), booleans and null.
 *
 * Object members whose value is `undefined` are skipped (as JSON.stringify does). Anything else that
 * is not JSON (bigint, NaN/Infinity, functions, symbols, class instances, lone surrogates, nesting deeper
 * than {@link MAX_CANONICAL_DEPTH}) gives an `invalid_value` result; nothing throws.
 */
import { fail, ok, type Result } from '../result.ts';

export const MAX_CANONICAL_DEPTH = 64;

const ESCAPES: Readonly<Record<string, string>> = {
  '"': '\\"',
  '\\': '\\\\',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
};

const NEEDS_ESCAPE = /["\\\u0000-\u001f]/g;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function quote(s: string): string {
  return `"${s.replace(NEEDS_ESCAPE, (c) => ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}"`;
}

class NotJson {
  constructor(readonly reason: string) {}
}

function serialize(value: unknown, depth: number, out: string[]): NotJson | undefined {
  if (depth > MAX_CANONICAL_DEPTH) return new NotJson('nesting too deep');
  switch (typeof value) {
    case 'string':
      if (LONE_SURROGATE.test(value)) return new NotJson('string with a lone surrogate');
      out.push(quote(value));
      return undefined;
    case 'number':
      if (!Number.isFinite(value)) return new NotJson('non-finite number');
      out.push(String(value));
      return undefined;
    case 'boolean':
      out.push(value ? 'true' : 'false');
      return undefined;
    case 'object': {
      if (value === null) {
        out.push('null');
        return undefined;
      }
      if (Array.isArray(value)) {
        out.push('[');
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out.push(',');
          const e = serialize(value[i] === undefined ? null : value[i], depth + 1, out);
          if (e) return e;
        }
        out.push(']');
        return undefined;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if (proto !== Object.prototype && proto !== null) return new NotJson('not a plain object');
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record).sort();
      out.push('{');
      let first = true;
      for (const key of keys) {
        const v = record[key];
        if (v === undefined) continue;
        if (!first) out.push(',');
        first = false;
        if (LONE_SURROGATE.test(key)) return new NotJson('key with a lone surrogate');
        out.push(quote(key), ':');
        const e = serialize(v, depth + 1, out);
        if (e) return e;
      }
      out.push('}');
      return undefined;
    }
    default:
      return new NotJson(`${typeof value} is not JSON`);
  }
}

/** The RFC 8785 canonical JSON text of `value`. */
export function canonicalJson(value: unknown): Result<string> {
  const out: string[] = [];
  const e = serialize(value, 0, out);
  return e ? fail('invalid_value', e.reason) : ok(out.join(''));
}
