import type pg from 'pg';
import { ok, type Err, type Failure, type Ok } from '../../protocol/result.ts';

/**
 * Leases in PostgreSQL: a named responsibility (a node's records, a relayer key, the stock desk key) held by one live
 * node at a time. A row names its holder (node id and boot id) and when it expires, by the database's clock, so the
 * nodes' own clocks never decide who holds what. A holder renews well inside the expiry; a lease not renewed in time
 * is free for anyone to take, atomically (one statement), so of several nodes that try exactly one gets it.
 *
 * The table is created by the migration `leases` (see `migrations/`).
 */
export const LEASES_TABLE = 'gate402_leases';

/** Whom a lease belongs to: the node's configured id, and the id of this run of it (a restart is a new boot). */
export interface LeaseHolder {
  node: string;
  boot: string;
}

/** Why a lease was not taken: another holder has it, live, for `expiresInMs` more unless it renews. */
export interface LeaseHeld extends Failure<'lease_held'> {
  name: string;
  holder: LeaseHolder;
  expiresInMs: number;
}

/** A lease taken: the epoch of this holder's grant (the same while it holds it; a new holder's is higher). */
export type LeaseResult = Ok<{ epoch: number }> | Err<LeaseHeld>;

/** What the leases read and write through: a `pg.Pool` (each statement stands alone, so no client is held). */
export type Queryable = Pick<pg.Pool, 'query'>;

export interface LeaseRow extends LeaseHolder {
  name: string;
  expiresInMs: number;
}

/** The lease of a node's own records (payments, batches, stock orders it started). */
export const nodeLease = (node: string) => `node:${node}`;
/** The lease of a relayer key, by its address. */
export const relayerLease = (address: string) => `relayer:${address.toLowerCase()}`;
/** The lease of the stock desk's key, by its address. */
export const deskLease = (address: string) => `desk:${address.toLowerCase()}`;

export class Leases {
  readonly #db: Queryable;
  readonly #me: LeaseHolder;
  readonly #leaseMs: number;
  readonly #timeoutMs: number;

  /** `timeoutMs` bounds every statement (a store that does not answer fails the call, never hangs it). */
  constructor(db: Queryable, me: LeaseHolder, opts: { leaseMs: number; timeoutMs: number }) {
    this.#db = db;
    this.#me = me;
    this.#leaseMs = opts.leaseMs;
    this.#timeoutMs = opts.timeoutMs;
  }

  get holder(): LeaseHolder {
    return this.#me;
  }

  get leaseMs(): number {
    return this.#leaseMs;
  }

  #query<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    return this.#db.query<R>({ text, values, query_timeout: this.#timeoutMs } as pg.QueryConfig);
  }

  /**
   * Takes `name` if it is free, expired, or already this boot's; else says who holds it. One statement: of any number
   * of nodes taking the same expired lease at once, one gets it. A new holder gets a new epoch (from a sequence, so
   * higher than any before); this boot taking its own lease again keeps its epoch.
   *
   * The row is locked `FOR UPDATE` first: a take waits for the writes that passed the lease's fence (they hold it
   * `FOR KEY SHARE` until they commit, see `record-writes.ts`), so whatever the taker reads next includes them.
   */
  async take(name: string): Promise<LeaseResult> {
    const taken = await this.#query<{ epoch: number }>(
      `WITH locked AS (SELECT 1 FROM ${LEASES_TABLE} WHERE name = $1 FOR UPDATE)
       INSERT INTO ${LEASES_TABLE} AS l (name, node, boot, expires_at)
       SELECT $1, $2, $3, clock_timestamp() + make_interval(secs => $4::double precision / 1000) FROM (SELECT count(*) FROM locked) AS waited
       ON CONFLICT (name) DO UPDATE SET node = EXCLUDED.node, boot = EXCLUDED.boot, expires_at = EXCLUDED.expires_at,
         epoch = CASE WHEN l.node = EXCLUDED.node AND l.boot = EXCLUDED.boot THEN l.epoch ELSE EXCLUDED.epoch END
       WHERE l.expires_at < clock_timestamp() OR (l.node = EXCLUDED.node AND l.boot = EXCLUDED.boot)
       RETURNING epoch::float8 AS epoch`,
      [name, this.#me.node, this.#me.boot, this.#leaseMs],
    );
    const epoch = taken.rows[0]?.epoch;
    if (taken.rowCount === 1 && epoch !== undefined) return ok({ epoch });
    const row = await this.read(name);
    // Released between the two statements: free now, so try once more.
    if (!row) return this.take(name);
    return {
      ok: false,
      error: {
        code: 'lease_held',
        name,
        holder: { node: row.node, boot: row.boot },
        expiresInMs: row.expiresInMs,
        message: `${name} is held by node ${row.node} for ${Math.ceil(row.expiresInMs / 1000)} s more unless it renews`,
      },
    };
  }

  /** Takes every one of `names`, or none: those taken by this call are given back when one is refused. Answers each epoch. */
  async takeAll(names: readonly string[]): Promise<Ok<Map<string, number>> | Err<LeaseHeld>> {
    const taken = new Map<string, number>();
    for (const name of names) {
      const result = await this.take(name);
      if (!result.ok) {
        await this.release([...taken.keys()]);
        return result;
      }
      taken.set(name, result.value.epoch);
    }
    return ok(taken);
  }

  /** Extends every lease this boot holds by a full term; answers the names still held (a missing one was lost). */
  async renew(): Promise<Set<string>> {
    const rows = await this.#query<{ name: string }>(
      `UPDATE ${LEASES_TABLE} SET expires_at = clock_timestamp() + make_interval(secs => $3::double precision / 1000)
       WHERE node = $1 AND boot = $2 RETURNING name`,
      [this.#me.node, this.#me.boot, this.#leaseMs],
    );
    return new Set(rows.rows.map((r) => r.name));
  }

  /** Gives `names` up, those this boot holds: another node may take them at once. */
  async release(names: readonly string[]): Promise<void> {
    if (!names.length) return;
    await this.#query(`DELETE FROM ${LEASES_TABLE} WHERE name = ANY($1::text[]) AND node = $2 AND boot = $3`, [names, this.#me.node, this.#me.boot]);
  }

  /** Ends `names` now, those this boot holds: free for any node to take (and so to finish what they stand for). */
  async expire(names: readonly string[]): Promise<void> {
    if (!names.length) return;
    await this.#query(`UPDATE ${LEASES_TABLE} SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE name = ANY($1::text[]) AND node = $2 AND boot = $3`, [
      names,
      this.#me.node,
      this.#me.boot,
    ]);
  }

  async read(name: string): Promise<LeaseRow | undefined> {
    const rows = await this.#query<LeaseRow>(
      `SELECT name, node, boot, greatest(0, extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS "expiresInMs" FROM ${LEASES_TABLE} WHERE name = $1`,
      [name],
    );
    return rows.rows[0];
  }

  /** Every lease whose name starts with `prefix`, live or expired (`expiresInMs` 0). */
  async list(prefix: string): Promise<LeaseRow[]> {
    const rows = await this.#query<LeaseRow>(
      `SELECT name, node, boot, greatest(0, extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS "expiresInMs"
       FROM ${LEASES_TABLE} WHERE starts_with(name, $1) ORDER BY name`,
      [prefix],
    );
    return rows.rows;
  }
}
