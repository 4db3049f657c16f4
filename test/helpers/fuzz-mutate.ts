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

/** A hex string with one nibble after `0x` changed to a different value (not merely another letter case). */
function flipNibble(rng: Rng, s: string): string {
  const body = s.startsWith('0x') ? 2 : 0;
  if (s.length <= body) return `${s}0`;
  const i = body + rng.int(s.length - body);
  const old = parseInt(s[i] as string, 16);
  const nibble = Number.isNaN(old) ? rng.int(16) : (old ^ rng.between(1, 15)) & 15;
  return `${s.slice(0, i)}${nibble.toString(16)}${s.slice(i + 1)}`;
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
    () => flipNibble(rng, s),
    () => flipNibble(rng, flipNibble(rng, s)),
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
    // a 65-byte signature: another v; and a 64-byte (EIP-2098) form that says something else
    choices.push(() => `${s.slice(0, 130)}${s.slice(130) === '1b' ? '1c' : '1b'}`, () => `${s.slice(0, 130)}00`, () => `${s.slice(0, 130)}ff`);
  }
  if (s.length === 42) for (const sub of substitutes) if (sub.toLowerCase() !== s.toLowerCase()) choices.push(() => sub);
  return rng.pick(choices)();
}

function otherString(rng: Rng, s: string): Json {
  const choices: Json[] = ['', `${s}x`, s.slice(0, Math.floor(s.length / 2)), 'A'.repeat(rng.pick([300, 5000, 70_000])), '\u202e\u0000\ud800', `${s}\u0000`, s.toUpperCase() === s ? `${s}-` : `${s.toUpperCase()}!`];
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
  for (let i = 0; i < count; i++) {
    const path = rng.pick(candidates);
    const old = getAt(out, path);
    if (old === undefined) continue; // removed by an earlier step
    const next = mutatedLeaf(rng, old, substitutes);
    out = setAt(out, path, next);
    what.push(`${path.join('.')}=${next === REMOVE ? '<removed>' : JSON.stringify(next).slice(0, 40)}`);
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
    () => [rng.bytes(rng.between(1, 300)).toString('latin1').replace(/[\x00-\x1f\x7f]/g, '?'), 'random latin1'],
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
