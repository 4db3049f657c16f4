/**
 * A statement that failed for want of the store (the database unreachable, restarting, out of disk, a timeout, its
 * connections saturated), not for what it carried. Nothing of it can be assumed written or read; the same statement
 * may pass a moment later. What a request that met it answers is `503` with `Retry-After` (the paywall's
 * `storeUnavailable`), never a `500`: the fault is ours and passes.
 */
export class StoreUnavailable extends Error {
  readonly code = 'store_unavailable';
  constructor(cause: unknown) {
    super(`the data store is unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'StoreUnavailable';
  }
}

/** Whether `err` is a statement that failed for want of the store (see {@link StoreUnavailable}). */
export function isStoreUnavailable(err: unknown): err is StoreUnavailable {
  return err instanceof StoreUnavailable || (err as { code?: unknown } | undefined)?.code === 'store_unavailable';
}
