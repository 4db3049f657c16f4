/**
 * Per-key token buckets (pure logic, injected clock).
 *
 * Each key starts with `capacity` tokens; tokens refill continuously at `refillPerSecond` up to `capacity`;
 * `take(key, cost)` succeeds when at least `cost` tokens are present and then removes them. A refused take
 * removes nothing and says how many whole seconds (at least 1) until `cost` tokens will be there.
 *
 * Memory is bounded: a bucket that has refilled to capacity is indistinguishable from a missing one, so
 * such idle buckets are dropped as they are met; and the number of keys is capped at `maxKeys` by evicting
 * the least recently used bucket (the `Map` keeps buckets in last-use order). An evicted key starts again
 * with a full bucket, which only ever errs on the permissive side.
 */

export interface TokenBucketOptions {
  /** Burst size: tokens in a fresh bucket, and the maximum. Positive. */
  capacity: number;
  /** Tokens added per second. Positive. */
  refillPerSecond: number;
  /** Milliseconds; defaults to `Date.now`. Injectable for tests. A clock that goes backwards is treated as standing still. */
  now?: () => number;
  /** Upper bound on tracked keys (default 100,000). */
  maxKeys?: number;
}

export type TakeResult = { allowed: true } | { allowed: false; retryAfterSeconds: number };

interface Bucket {
  tokens: number;
  /** ms timestamp `tokens` refers to */
  at: number;
}

/** How many of the least recently used buckets each `take` inspects for being idle (amortised O(1)). */
const SWEEP_PER_TAKE = 4;

export class TokenBucketLimiter {
  readonly capacity: number;
  readonly refillPerSecond: number;
  readonly maxKeys: number;
  private readonly now: () => number;
  private readonly buckets = new Map<string, Bucket>();

  constructor(options: TokenBucketOptions) {
    const { capacity, refillPerSecond } = options;
    const maxKeys = options.maxKeys ?? 100_000;
    if (!Number.isFinite(capacity) || capacity <= 0) throw new RangeError(`capacity must be a positive number, got ${capacity}`);
    if (!Number.isFinite(refillPerSecond) || refillPerSecond <= 0) {
      throw new RangeError(`refillPerSecond must be a positive number, got ${refillPerSecond}`);
    }
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) throw new RangeError(`maxKeys must be a positive integer, got ${maxKeys}`);
    this.capacity = capacity;
    this.refillPerSecond = refillPerSecond;
    this.maxKeys = maxKeys;
    this.now = options.now ?? Date.now;
  }

  /** Number of keys currently tracked (buckets below capacity, or not yet swept). */
  get size(): number {
    return this.buckets.size;
  }

  /** Tokens `key` holds at `now` (capacity for an unknown key). Does not touch the bucket. */
  tokens(key: string): number {
    const b = this.buckets.get(key);
    return b === undefined ? this.capacity : this.level(b, this.now());
  }

  take(key: string, cost = 1): TakeResult {
    if (!Number.isFinite(cost) || cost <= 0 || cost > this.capacity) {
      throw new RangeError(`cost must be in (0, capacity=${this.capacity}], got ${cost}`);
    }
    const now = this.now();
    const existing = this.buckets.get(key);
    let tokens: number;
    let at: number;
    if (existing === undefined) {
      tokens = this.capacity;
      at = now;
    } else {
      tokens = this.level(existing, now);
      at = Math.max(existing.at, now);
      this.buckets.delete(key); // re-inserted below: moves the key to the most-recently-used end
    }
    this.sweep(now);

    let result: TakeResult;
    if (tokens >= cost) {
      tokens -= cost;
      result = { allowed: true };
    } else {
      const seconds = (cost - tokens) / this.refillPerSecond;
      // Rounded up to whole seconds (what Retry-After carries); the epsilon absorbs float noise like 2.0000000000000004.
      result = { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(seconds - 1e-9)) };
    }
    if (tokens < this.capacity) {
      while (this.buckets.size >= this.maxKeys) {
        const oldest = this.buckets.keys().next();
        if (oldest.done === true) break;
        this.buckets.delete(oldest.value);
      }
      this.buckets.set(key, { tokens, at });
    }
    return result;
  }

  /** Forgets every bucket. */
  clear(): void {
    this.buckets.clear();
  }

  private level(b: Bucket, now: number): number {
    const elapsedMs = Math.max(0, now - b.at);
    return Math.min(this.capacity, b.tokens + (elapsedMs * this.refillPerSecond) / 1000);
  }

  /** Drops least-recently-used buckets that have refilled completely. */
  private sweep(now: number): void {
    let n = 0;
    for (const [key, b] of this.buckets) {
      if (n++ >= SWEEP_PER_TAKE) break;
      if (this.level(b, now) >= this.capacity) this.buckets.delete(key);
    }
  }
}
