import type { ClaimResult, NonceClaims } from '../nonce-claims.ts';
import type { Sql, Writer } from './open-postgres-store.ts';
import type { WriteSet } from '../write-set.ts';
import { fenceCte, fenceValues, passedFence, refusedWrites, upsertRecords, writeColumns } from './record-writes.ts';

const CLAIM_PLAIN = 'INSERT INTO claims (space, key, holder) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING true AS won';
/** A claim (`$1` space, `$2` key, `$3` holder) behind the fence in `$4`, `$5` when `fenced`, with `withClaim` writes from `$6` when `writes`. */
const CLAIM = (fenced: boolean, writes: boolean) => {
  const fence = fenceCte(fenced ? (writes ? 9 : 4) : undefined);
  return `WITH ${fence},
    c AS (INSERT INTO claims (space, key, holder) SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM fence) ON CONFLICT DO NOTHING RETURNING 1)
    ${writes ? `, w AS (${upsertRecords(4, 'EXISTS (SELECT 1 FROM c)')})` : ''}
    SELECT EXISTS (SELECT 1 FROM fence) AS live, EXISTS (SELECT 1 FROM c) AS won${writes ? ", ARRAY(SELECT collection || '/' || key FROM w) AS written" : ''}`;
};
const CLAIMS = { fenced: CLAIM(true, false), fencedWrites: CLAIM(true, true), alone: CLAIM(false, false), aloneWrites: CLAIM(false, true) };
const RELEASE_FENCED = `WITH ${fenceCte(4)}, d AS (DELETE FROM claims WHERE space = $1 AND key = $2 AND holder = $3 AND EXISTS (SELECT 1 FROM fence) RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS live, EXISTS (SELECT 1 FROM d) AS done`;
/** A takeover (`$1` space, `$2` key, `$3` from, `$4` to) behind the fence in `$5`, `$6` (from `$10` with writes) when `fenced`, with `withTakeover` writes from `$5` when `writes`. */
const TAKEOVER = (fenced: boolean, writes: boolean) => `WITH ${fenceCte(fenced ? (writes ? 10 : 5) : undefined)},
  u AS (UPDATE claims SET holder = $4 WHERE space = $1 AND key = $2 AND holder = $3 AND EXISTS (SELECT 1 FROM fence) RETURNING 1)
  ${writes ? `, w AS (${upsertRecords(5, 'EXISTS (SELECT 1 FROM u)')})` : ''}
  SELECT EXISTS (SELECT 1 FROM fence) AS live, EXISTS (SELECT 1 FROM u) AS done${writes ? ", ARRAY(SELECT collection || '/' || key FROM w) AS written" : ''}`;
const TAKEOVERS = { fenced: TAKEOVER(true, false), fencedWrites: TAKEOVER(true, true), aloneWrites: TAKEOVER(false, true) };

/**
 * A set of claims in the `claims` table. A claim is one INSERT ... ON CONFLICT DO NOTHING, its `withClaim` writes in
 * the same statement (so in the same transaction): of any number of concurrent claims on a key, from any number of
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

  /** `withClaim` runs before the claim is tried and must only `putWithin`: its writes are applied only if the claim wins. */
  async claim(key: string, holder: string, withClaim?: () => void): Promise<ClaimResult> {
    const writes = withClaim ? this.#within.gather(withClaim) : [];
    const lease = this.#w.lease();
    let won: boolean;
    if (!lease && writes.length === 0) {
      won = (await this.#sql.write<{ won: boolean }>(CLAIM_PLAIN, [this.#space, key, holder])).rows[0]?.won === true;
    } else {
      const text = lease ? (writes.length ? CLAIMS.fencedWrites : CLAIMS.fenced) : CLAIMS.aloneWrites;
      const values = [this.#space, key, holder, ...(writes.length ? writeColumns(writes, this.#w.orders) : []), ...fenceValues(lease)];
      const { rows } = await this.#sql.write<{ live: boolean; won: boolean; written?: string[] }>(text, values);
      passedFence(lease, rows[0]);
      won = rows[0]?.won === true;
      if (won) for (const r of refusedWrites(writes, rows[0]?.written ?? [], this.#w.orders)) this.#w.onRefused?.(r.collection, r.key, r.refused);
    }
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
    const lease = this.#w.lease();
    if (!lease && writes.length === 0) {
      return (await this.#sql.write('UPDATE claims SET holder = $4 WHERE space = $1 AND key = $2 AND holder = $3', [this.#space, key, from, to])).rowCount === 1;
    }
    const text = lease ? (writes.length ? TAKEOVERS.fencedWrites : TAKEOVERS.fenced) : TAKEOVERS.aloneWrites;
    const values = [this.#space, key, from, to, ...(writes.length ? writeColumns(writes, this.#w.orders) : []), ...fenceValues(lease)];
    const { rows } = await this.#sql.write<{ live: boolean; done: boolean; written?: string[] }>(text, values);
    passedFence(lease, rows[0]);
    const done = rows[0]?.done === true;
    if (done) for (const r of refusedWrites(writes, rows[0]?.written ?? [], this.#w.orders)) this.#w.onRefused?.(r.collection, r.key, r.refused);
    return done;
  }

  /** Read with the other lookups of this space asked meanwhile, in one statement (see `group-read.ts`). */
  holder(key: string): Promise<string | undefined> {
    return this.#sql.holderOf.get(this.#space, key);
  }
}
