import type { ClaimResult, NonceClaims } from '../nonce-claims.ts';
import type { Sql } from './open-postgres-store.ts';
import type { WriteSet } from '../write-set.ts';
import { upsertRecords, writeColumns } from './record-writes.ts';

/**
 * A set of claims in the `claims` table. A claim is one INSERT ... ON CONFLICT DO NOTHING, its `withClaim` writes in
 * the same statement (so in the same transaction): of any number of concurrent claims on a key, from any number of
 * nodes, exactly one inserts the row, and it learns so once the row is committed.
 */
export class PostgresClaims implements NonceClaims {
  readonly #space: string;
  readonly #sql: Sql;
  readonly #within: WriteSet<string>;

  constructor(space: string, sql: Sql, within: WriteSet<string>) {
    this.#space = space;
    this.#sql = sql;
    this.#within = within;
  }

  /** `withClaim` runs before the claim is tried and must only `putWithin`: its writes are applied only if the claim wins. */
  async claim(key: string, holder: string, withClaim?: () => void): Promise<ClaimResult> {
    const writes = withClaim ? this.#within.gather(withClaim) : [];
    const { rows } =
      writes.length === 0
        ? await this.#sql.write<{ won: boolean }>('INSERT INTO claims (space, key, holder) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING true AS won', [this.#space, key, holder])
        : await this.#sql.write<{ won: boolean }>(
            `WITH c AS (INSERT INTO claims (space, key, holder) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING 1),
             w AS (${upsertRecords(4, 'EXISTS (SELECT 1 FROM c)')} RETURNING 1)
             SELECT EXISTS (SELECT 1 FROM c) AS won, (SELECT count(*) FROM w) AS written`,
            [this.#space, key, holder, ...writeColumns(writes)],
          );
    if (rows[0]?.won === true) return { claimed: true };
    return { claimed: false, holder: (await this.holder(key)) ?? '' };
  }

  async release(key: string, holder: string): Promise<boolean> {
    const { rowCount } = await this.#sql.write('DELETE FROM claims WHERE space = $1 AND key = $2 AND holder = $3', [this.#space, key, holder]);
    return rowCount === 1;
  }

  async takeover(key: string, from: string, to: string): Promise<boolean> {
    const { rowCount } = await this.#sql.write('UPDATE claims SET holder = $4 WHERE space = $1 AND key = $2 AND holder = $3', [this.#space, key, from, to]);
    return rowCount === 1;
  }

  async holder(key: string): Promise<string | undefined> {
    const { rows } = await this.#sql.read<{ holder: string }>('SELECT holder FROM claims WHERE space = $1 AND key = $2', [this.#space, key]);
    return rows[0]?.holder;
  }
}
