/**
 * A small seeded PRNG (sfc32, seeded through splitmix32) and the pickers a fuzz test draws from: one seed replays a
 * whole run. Not for anything secret.
 */
export interface Rng {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [0, n). */
  int(n: number): number;
  /** An integer in [lo, hi]. */
  between(lo: number, hi: number): number;
  pick<T>(items: readonly T[]): T;
  /** True with probability p. */
  chance(p: number): boolean;
  /** `n` random bytes. */
  bytes(n: number): Buffer;
  /** `n` random lower-case hex digits. */
  hex(n: number): string;
}

function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export function createRng(seed: number): Rng {
  const init = splitmix32(seed);
  let a = init();
  let b = init();
  let c = init();
  let d = init();
  const u32 = (): number => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) >>> 0;
    return t;
  };
  for (let i = 0; i < 12; i++) u32();
  const rng: Rng = {
    next: () => u32() / 4294967296,
    int: (n) => Math.floor(rng.next() * n),
    between: (lo, hi) => lo + rng.int(hi - lo + 1),
    pick: (items) => {
      if (items.length === 0) throw new Error('pick from nothing');
      return items[rng.int(items.length)] as (typeof items)[number];
    },
    chance: (p) => rng.next() < p,
    bytes: (n) => {
      const out = Buffer.alloc(n);
      for (let i = 0; i < n; i++) out[i] = rng.int(256);
      return out;
    },
    hex: (n) => {
      let s = '';
      for (let i = 0; i < n; i++) s += '0123456789abcdef'[rng.int(16)];
      return s;
    },
  };
  return rng;
}

/** The run's seed: `GATE402_FUZZ_SEED` when set (decimal or 0x-hex), else a fresh one. */
export function fuzzSeed(env: NodeJS.ProcessEnv = process.env): number {
  const given = env.GATE402_FUZZ_SEED?.trim();
  if (given) {
    const n = Number(given);
    if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new Error(`GATE402_FUZZ_SEED must be an integer in [0, 2^32): ${given}`);
    return n;
  }
  return Math.floor(Math.random() * 0x100000000) >>> 0;
}
