import type { ClaimResult, NonceClaims } from '../nonce-claims.ts';
import type { Sql, Writer } from './open-postgres-store.ts';
import type { WriteSet } from '../write-set.ts';
import { fenceCte, fenceValues, passedFence } from './record-writes.ts';

const RELEASE_FENCED = `WITH ${fenceCte(4)}, d AS (DELETE FROM claims WHERE space = $1 AND key = $2 AND holder = $3 AND EXISTS (SELECT 1 FROM fence) RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS live, EXISTS (SELECT 1 FROM d) AS done`;

/**
 * A set of claims in the `claims` table. A claim is an INSERT ... ON CONFLICT DO NOTHING, its `withClaim` writes in
 * the same statement (so in the same transaction), with the other claims of its space asked in the same turn: of any number of concurrent claims on a key, from any number of
 * nodes, exactly one inserts the row, and it learns so once the row is committed. In a cluster every claim, release
 * and takeover is fenced by the node's lease in the same statement (see `record-writes.ts`).
 */
export class PostgresClaims implements NonceClaims {
  readonly #space: string;
  readonly #sql: Sql;
  readonly #within: WriteSet<string>;
  readonly #w: Writer;

  constructor(space: string, sql: Sql, within: WriteSet<string>, writer: Writer) {
    this.#space = space;
    this.#sql = sql;
    this.#within = within;
    this.#w = writer;
  }

  /**
   * `withClaim` runs before the claim is tried and must only `putWithin`: its writes are applied only if the claim wins.
   * The claim goes with the other claims of this space asked meanwhile, in one statement (see `group-claim.ts`).
   */
  async claim(key: string, holder: string, withClaim?: () => void): Promise<ClaimResult> {
    const writes = withClaim ? this.#within.gather(withClaim) : [];
    const { won, refused } = await this.#w.claims.ask({ space: this.#space, key, holder, writes }, this.#w.lease());
    for (const r of refused) this.#w.onRefused?.(r.collection, r.key, r.refused);
    if (won) return { claimed: true };
    return { claimed: false, holder: (await this.holder(key)) ?? '' };
  }

  async release(key: string, holder: string): Promise<boolean> {
    const lease = this.#w.lease();
    if (!lease) return (await this.#sql.write('DELETE FROM claims WHERE space = $1 AND key = $2 AND holder = $3', [this.#space, key, holder])).rowCount === 1;
    const { rows } = await this.#sql.write<{ live: boolean; done: boolean }>(RELEASE_FENCED, [this.#space, key, holder, ...fenceValues(lease)]);
    passedFence(lease, rows[0]);
    return rows[0]?.done === true;
  }

  /** `withTakeover` runs before the takeover is tried and must only `putWithin`: its writes are applied only if the takeover succeeds. */
  async takeover(key: string, from: string, to: string, withTakeover?: () => void): Promise<boolean> {
    const writes = withTakeover ? this.#within.gather(withTakeover) : [];
    const { won, refused } = await this.#w.claims.ask({ space: this.#space, key, from, holder: to, writes }, this.#w.lease());
    for (const r of refused) this.#w.onRefused?.(r.collection, r.key, r.refused);
    return won;
  }

  /** Read with the other lookups of this space asked meanwhile, in one statement (see `group-read.ts`). */
  holder(key: string): Promise<string | undefined> {
    return this.#sql.holderOf.get(this.#space, key);
  }
}
