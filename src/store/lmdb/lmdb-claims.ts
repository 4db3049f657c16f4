import type { Database } from 'lmdb';
import type { ClaimResult, NonceClaims } from '../nonce-claims.ts';
import type { WriteSet } from '../write-set.ts';
import type { Durable } from './open-lmdb-store.ts';

/**
 * Claims in an LMDB database. The condition is evaluated inside LMDB's write transaction, so of any number of
 * concurrent claims on one key exactly one wins, and the winner learns it only once the claim is on disk.
 */
export class LmdbClaims implements NonceClaims {
  readonly #db: Database;
  readonly #durable: Durable;
  readonly #within: WriteSet<Database>;

  constructor(db: Database, durable: Durable, within: WriteSet<Database>) {
    this.#db = db;
    this.#durable = durable;
    this.#within = within;
  }

  async claim(key: string, holder: string, withClaim?: () => void): Promise<ClaimResult> {
    const writes = withClaim ? this.#within.gather(withClaim) : [];
    const won = await this.#durable(() =>
      this.#db.ifNoExists(key, () => {
        void this.#db.put(key, holder);
        for (const w of writes) void w.target.put(w.key, w.value);
      }),
    );
    if (won) return { claimed: true };
    const current = this.#db.get(key) as string | undefined;
    return { claimed: false, holder: current ?? '' };
  }

  async release(key: string, holder: string): Promise<boolean> {
    const done = await this.#durable(() =>
      this.#db.transaction(() => {
        if (this.#db.get(key) !== holder) return false;
        void this.#db.remove(key);
        return true;
      }),
    );
    return done === true;
  }

  async takeover(key: string, from: string, to: string, withTakeover?: () => void): Promise<boolean> {
    const writes = withTakeover ? this.#within.gather(withTakeover) : [];
    const done = await this.#durable(() =>
      this.#db.transaction(() => {
        if (this.#db.get(key) !== from) return false;
        void this.#db.put(key, to);
        for (const w of writes) void w.target.put(w.key, w.value);
        return true;
      }),
    );
    return done === true;
  }

  holder(key: string): Promise<string | undefined> {
    return Promise.resolve(this.#db.get(key) as string | undefined);
  }
}
