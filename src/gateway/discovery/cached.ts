/**
 * A document built from the merchant directory, kept for `ttlMs`: a million requests rebuild it once per period,
 * and a merchant registered (here or on another node) shows within one period.
 */
export function cachedFor<T>(ttlMs: number, build: () => T, now: () => number = Date.now): () => T {
  let value: T | undefined;
  let builtAt = Number.NEGATIVE_INFINITY;
  return () => {
    const t = now();
    if (value === undefined || t - builtAt >= ttlMs || t < builtAt) {
      value = build();
      builtAt = t;
    }
    return value;
  };
}
