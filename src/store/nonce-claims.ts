import type { Database } from 'lmdb';
import type { Durable } from './open-store.ts';

export type ClaimResult = { claimed: true } | { claimed: false; holder: string };

/**
 * Atomic, durable claims on payment nonces. The condition is evaluated inside LMDB's write transaction, so of any
 * number of concurrent claims on one key exactly one wins, and the winner learns it only once the claim is on disk.
 */
export class NonceClaims {
  readonly #db: Database;
  readonly #durable: Durable;

  constructor(db: Database, durable: Durable) {
    this.#db = db;
    this.#durable = durable;
  }

  /** `withClaim` may write more (see `DurableCollection.putWithin`): it is written with the claim, and only if it wins. */
  async claim(key: string, holder: string, withClaim?: () => void): Promise<ClaimResult> {
    const won = await this.#durable(
      this.#db.ifNoExists(key, () => {
        void this.#db.put(key, holder);
        withClaim?.();
      }),
    );
    if (won) return { claimed: true };
    const current = this.#db.get(key) as string | undefined;
    return { claimed: false, holder: current ?? '' };
  }

  /** Gives a claim up (the payment failed without settling), if `holder` still holds it. */
  async release(key: string, holder: string): Promise<boolean> {
    const done = await this.#durable(
      this.#db.transaction(() => {
        if (this.#db.get(key) !== holder) return false;
        void this.#db.remove(key);
        return true;
      }),
    );
    return done === true;
  }

  /** Moves a stale claim (its payment failed, or died before writing a record) from `from` to `to`, atomically. */
  async takeover(key: string, from: string, to: string): Promise<boolean> {
    const done = await this.#durable(
      this.#db.transaction(() => {
        if (this.#db.get(key) !== from) return false;
        void this.#db.put(key, to);
        return true;
      }),
    );
    return done === true;
  }

  holder(key: string): string | undefined {
    return this.#db.get(key) as string | undefined;
  }
}
