/**
 * Mutations of valid payment credentials for the fuzz test. Every mutation here changes what the credential MEANS
 * (a signed or offer-bound value becomes another value, a type changes, a part goes missing), never only its
 * spelling: so a gateway or facilitator that accepts one has accepted a forged or broken payment.
 */
import type { Rng } from './fuzz-random.ts';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonPath = ReadonlyArray<string | number>;

const TWO_256 = 2n ** 256n;

/** Every leaf (scalar) of `value` with its path. */
export function leafPaths(value: Json, path: JsonPath = []): JsonPath[] {
  if (value === null || typeof value !== 'object') return [path];
  const entries: Array<[string | number, Json]> = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  return entries.flatMap(([k, v]) => leafPaths(v, [...path, k]));
}

export function getAt(value: Json, path: JsonPath): Json | undefined {
  let cur: Json | undefined = value;
  for (const k of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string | number, Json>)[k as never];
  }
  return cur;
}

const REMOVE = Symbol('remove');

/** A deep copy of `value` with the leaf at `path` replaced (or removed). */
export function setAt(value: Json, path: JsonPath, next: Json | typeof REMOVE): Json {
  const copy = structuredClone(value);
  if (path.length === 0) return next === REMOVE ? null : next;
  let cur = copy as Record<string | number, Json>;
  for (const k of path.slice(0, -1)) cur = cur[k as never] as unknown as Record<string | number, Json>;
  const last = path[path.length - 1] as string | number;
  if (next === REMOVE) {
    if (Array.isArray(cur)) cur.splice(last as number, 1);
    else delete cur[last];
  } else cur[last] = next;
  return copy;
}

/** A hex string with `count` distinct nibbles after `0x` changed to other values (not merely another letter case). */
function flipNibbles(rng: Rng, s: string, count = 1): string {
  const body = s.startsWith('0x') ? 2 : 0;
  if (s.length <= body) return `${s}0`;
  const positions = new Set<number>();
  while (positions.size < Math.min(count, s.length - body)) positions.add(body + rng.int(s.length - body));
  let out = s;
  for (const i of positions) {
    const old = parseInt(out[i] as string, 16);
    const nibble = Number.isNaN(old) ? rng.int(16) : (old ^ rng.between(1, 15)) & 15;
    out = `${out.slice(0, i)}${nibble.toString(16)}${out.slice(i + 1)}`;
  }
  return out;
}

/**
 * What an ECDSA signature says, whatever its spelling: r, s and the y parity, from 65 bytes (v 27/28 or 0/1) or the
 * 64-byte EIP-2098 form. Undefined for anything else. Two spellings of one signature are not a mutation.
 */
function signatureMeaning(sig: string): string | undefined {
  const h = sig.toLowerCase();
  if (/^0x[0-9a-f]{130}$/.test(h)) {
    const parity = { '1b': 0, '00': 0, '1c': 1, '01': 1 }[h.slice(130)];
    return parity === undefined ? undefined : `${h.slice(2, 130)}:${parity}`;
  }
  if (/^0x[0-9a-f]{128}$/.test(h)) {
    const top = parseInt(h[66] as string, 16);
    return `${h.slice(2, 66)}${(top & 7).toString(16)}${h.slice(67, 130)}:${top >> 3}`;
  }
  return undefined;
}

/** Values of another type or shape than a leaf had. */
function otherType(rng: Rng, old: Json): Json {
  const choices: Json[] = [null, true, false, [], {}, [old], { value: old }, -1, 1.5, 1e308, 'null', ''];
  if (typeof old === 'string' && /^\d+$/.test(old)) choices.push(Number(old) + 1); // a number, and not the same one
  return rng.pick(choices.filter((c) => typeof c !== typeof old || c !== old));
}

/** A replacement for a uint256 decimal string with another numeric value, or not a canonical decimal at all. */
function otherUint(rng: Rng, s: string): Json {
  const v = BigInt(s);
  const choices = [
    (v + 1n).toString(),
    v > 0n ? (v - 1n).toString() : '1',
    v === 0n ? '7' : '0',
    TWO_256.toString(),
    (TWO_256 - 1n).toString(),
    (TWO_256 + v).toString(),
    `-${(v + 1n).toString()}`,
    v === 0n ? '10' : `${s}0`,
    '9'.repeat(200),
    'NaN',
    'Infinity',
    'abc',
    '',
    `${(v + 1n).toString()}.0`,
  ];
  return rng.pick(choices);
}

/** A replacement for a 0x-hex string (address, nonce, signature) that is another value or no valid hex at all. */
function otherHex(rng: Rng, s: string, substitutes: readonly string[]): Json {
  const choices: Array<() => Json> = [
    () => flipNibbles(rng, s),
    () => flipNibbles(rng, s, 2),
    () => s.slice(0, Math.max(2, s.length - 2 * rng.between(1, 8))),
    () => `${s}${rng.hex(2 * rng.between(1, 4))}`,
    () => s.slice(2), // no 0x
    () => `0x${'0'.repeat(Math.max(0, s.length - 2))}`,
    () => `0x${rng.hex(Math.max(0, s.length - 2))}`,
    () => `${s.slice(0, -1)}g`,
    () => `0x${'f'.repeat(Math.max(0, s.length - 2))}`,
    () => `0x${rng.hex(4096)}`,
  ];
  if (s.length === 132) {
    // a 65-byte signature: the other y parity (in either spelling of v), a v no one accepts, 63 bytes
    const other = signatureMeaning(s)?.endsWith(':0') ? ['1c', '01'] : ['1b', '00'];
    choices.push(
      () => `${s.slice(0, 130)}${rng.pick(other)}`,
      () => `${s.slice(0, 130)}${rng.pick(['ff', '1d', '02', ''])}`,
      () => s.slice(0, 128),
    );
  }
  if (s.length === 42) for (const sub of substitutes) if (sub.toLowerCase() !== s.toLowerCase()) choices.push(() => sub);
  const before = signatureMeaning(s);
  for (;;) {
    const next = rng.pick(choices)();
    // Never the same signature spelled otherwise (v as 0/1, the 64-byte form): that is no forgery.
    if (before === undefined || typeof next !== 'string' || signatureMeaning(next) !== before) return next;
  }
}

function otherString(rng: Rng, s: string): Json {
  const choices: Json[] = [
    '',
    `${s}x`,
    s.slice(0, Math.floor(s.length / 2)),
    'A'.repeat(rng.pick([300, 5000, 70_000])),
    '\u202e\u0000\ud800',
    `${s}\u0000`,
    s.toUpperCase() === s ? `${s}-` : `${s.toUpperCase()}!`,
  ];
  return rng.pick(choices.filter((c) => c !== s));
}

/** A value for the leaf at `path` of `value` that means something else than the old one. */
export function mutatedLeaf(rng: Rng, old: Json, substitutes: readonly string[]): Json | typeof REMOVE {
  if (rng.chance(0.1)) return REMOVE;
  if (rng.chance(0.15)) return otherType(rng, old);
  if (typeof old === 'string') {
    if (/^\d+$/.test(old) && old.length < 90) return otherUint(rng, old);
    if (/^0x[0-9a-fA-F]*$/.test(old)) return otherHex(rng, old, substitutes);
    return otherString(rng, old);
  }
  if (typeof old === 'number') return rng.pick([old + 1, old - 1, -old - 1, 0 === old ? 1 : 0, 2 ** 53 + 2, Number.MAX_VALUE, String(old + 1)]);
  if (typeof old === 'boolean') return !old;
  return otherType(rng, old);
}

/** A short, telling rendering of a value: long strings keep their head, tail and length. */
function brief(v: Json): string {
  const text = JSON.stringify(v);
  return text.length <= 48 ? text : `${text.slice(0, 24)}…${text.slice(-16)} (${text.length - 2} chars)`;
}

/**
 * `value` with one to three of the `bound` leaves (those whose change must void the credential) mutated, and
 * sometimes an extra key added beside them (never alone: an unknown key on its own may be harmless).
 */
export function mutateBound(rng: Rng, value: Json, bound: (path: JsonPath) => boolean, substitutes: readonly string[]): { value: Json; what: string } {
  const candidates = leafPaths(value).filter(bound);
  if (candidates.length === 0) throw new Error('no bound leaf to mutate');
  let out = value;
  const what: string[] = [];
  const count = rng.pick([1, 1, 1, 2, 3]);
  // Each step takes a leaf no earlier step took: a second change of one leaf could put its original value back.
  const untouched = [...candidates];
  for (let i = 0; i < count && untouched.length > 0; i++) {
    const path = untouched.splice(rng.int(untouched.length), 1)[0] as JsonPath;
    const old = getAt(out, path);
    if (old === undefined) continue; // removed by an earlier step
    const next = mutatedLeaf(rng, old, substitutes);
    out = setAt(out, path, next);
    what.push(`${path.join('.')}=${next === REMOVE ? '<removed>' : brief(next)}`);
  }
  if (what.length === 0) {
    const path = rng.pick(candidates);
    out = setAt(out, path, REMOVE);
    what.push(`${path.join('.')}=<removed>`);
  }
  if (rng.chance(0.15) && out !== null && typeof out === 'object' && !Array.isArray(out)) {
    const key = rng.pick(['__proto__', 'constructor', 'extensions', 'x402Version2', 'payload ', '\u0000']);
    out = { ...out, [key]: rng.pick<Json>([{ polluted: true }, [], 'x', 1]) };
    what.push(`+${JSON.stringify(key)}`);
  }
  return { value: out, what: what.join(' ') };
}

/** Garbage in place of a whole base64(JSON) token: truncated, random, not base64, base64 of the wrong JSON, huge. */
export function garbageToken(rng: Rng, token: string, encode: (json: string) => string): { value: string; what: string } {
  const cut = Math.max(0, token.length - rng.between(4, Math.max(4, token.length)));
  const choices: Array<() => [string, string]> = [
    () => [token.slice(0, cut), `truncated to ${cut}`],
    () => [rng.bytes(rng.between(1, 600)).toString('base64'), 'random bytes, base64'],
    () => [
      rng
        .bytes(rng.between(1, 300))
        .toString('latin1')
        // biome-ignore lint/suspicious/noControlCharactersInRegex: strips control characters from random header text on purpose
        .replace(/[\x00-\x1f\x7f]/g, '?'),
      'random latin1',
    ],
    () => [`${token}${rng.pick(['!', '%', '{', '"', '\\', '~~~~'])}`, 'trailing junk'],
    () => [`${rng.pick(['!', '%', '{'])}${token}`, 'leading junk'],
    () => [encode(rng.pick(['null', '[]', '{}', '0', '"x"', 'true', '{"x402Version":2}', '{"challenge":null,"payload":null}', '[{"x402Version":2}]'])), 'base64 of other JSON'],
    () => [encode('{'.repeat(rng.pick([100, 5000]))), 'base64 of deep nesting'],
    () => [encode(`${'['.repeat(3000)}${']'.repeat(3000)}`), 'base64 of a deep array'],
    () => ['A'.repeat(rng.pick([20_000, 60_000])), 'huge'],
    () => [encode(token), 'double-encoded'],
    () => ['', 'empty'],
    () => [encode('{"x402Version":2,"accepted":{},"payload":{}}'), 'empty objects'],
    () => [encode(Buffer.from(token, 'base64').subarray(0, -rng.between(1, 30)).toString('latin1')), 'decoded JSON truncated'],
  ];
  const [value, what] = rng.pick(choices)();
  return { value, what };
}
