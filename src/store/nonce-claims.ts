export type ClaimResult = { claimed: true } | { claimed: false; holder: string };

/**
 * Atomic, durable claims on keys (payment nonces, served payments, ...). Of any number of concurrent claims on one
 * key, from any number of processes sharing the store, exactly one wins, and the winner learns it only once the
 * claim is durable.
 */
export interface NonceClaims {
  /**
   * `withClaim` may write more (see `DurableCollection.putWithin`): it is written with the claim, and only if it
   * wins. It runs before the claim is tried, and must do nothing but `putWithin`.
   */
  claim(key: string, holder: string, withClaim?: () => void): Promise<ClaimResult>;
  /** Gives a claim up (the payment failed without settling), if `holder` still holds it. */
  release(key: string, holder: string): Promise<boolean>;
  /**
   * Moves a stale claim (its payment failed, or died before writing a record) from `from` to `to`, atomically.
   * `withTakeover`, as `withClaim` of {@link claim}: its `putWithin` writes go with the takeover, only if it succeeds.
   */
  takeover(key: string, from: string, to: string, withTakeover?: () => void): Promise<boolean>;
  holder(key: string): Promise<string | undefined>;
}
