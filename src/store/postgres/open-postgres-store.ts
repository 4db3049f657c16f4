import { createHash } from 'node:crypto';
import pg from 'pg';
import type { FenceSource, LeaseToken } from '../fence.ts';
import type { RecordOrders, Refused } from '../record-order.ts';
import type { Store, StoreOptions } from '../store.ts';
import { StoreUnavailable } from '../store-unavailable.ts';
import { WriteHealth } from '../write-health.ts';
import { migrate } from './migrate.ts';
import { PostgresClaims } from './postgres-claims.ts';
import { PostgresCollection } from './postgres-collection.ts';
import { WriteSet } from '../write-set.ts';
import { GroupCommit, type UpsertRow } from './group-commit.ts';
import { GroupRead } from './group-read.ts';
import { type ClaimRow, GroupClaims } from './group-claim.ts';
import { PLAIN_UPSERT } from './record-writes.ts';

export interface PostgresStoreOptions extends StoreOptions {
  /** Connections this process keeps at most (default 10). */
  poolSize?: number;
  /** How long connecting, or waiting for a free connection, may take (default 5 s). */
  connectTimeoutMs?: number;
  /** How long one statement may run, server-side and as seen from here (default 5 s). */
  statementTimeoutMs?: number;
}

/** A PostgreSQL store, and its connection pool for what else this process keeps in the database (leases, notifications). */
export interface PostgresStore extends Store {
  readonly pool: pg.Pool;
}

/** The statements the collections and claims run: writes count toward the store's health, and are timed. */
export interface Sql {
  read<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<R>>;
  write<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<R>>;
  /** A record's value by collection (the scope) and key, read with the other lookups asked meanwhile (`group-read.ts`). */
  recordOf: GroupRead<unknown>;
  /** A claim's holder by space (the scope) and key, likewise. */
  holderOf: GroupRead<string>;
}

/** Records by collection and keys: one statement for many lookups. */
const RECORDS_BY_KEYS = 'SELECT key, value FROM records WHERE collection = $1 AND key = ANY($2::text[])';
/** Claim holders by space and keys. */
const HOLDERS_BY_KEYS = 'SELECT key, holder FROM claims WHERE space = $1 AND key = ANY($2::text[])';

/** What the collections and claims write with besides their statements: the fence, the ranks, whom to tell of refusals. */
export interface Writer {
  /** The lease this store's writes carry now (undefined: unfenced). */
  lease(): LeaseToken | undefined;
  orders: RecordOrders | undefined;
  onRefused: ((collection: string, key: string, refused: Refused) => void) | undefined;
  /** Record writes, a turn of the event loop's in one statement. */
  group: GroupCommit;
  /** Claims and takeovers, a turn's of each space in one statement. */
  claims: GroupClaims;
}

/** Statements waiting for a connection beyond this many fail at once instead of queueing (memory stays bounded). */
const MAX_WAITING = 10_000;

/** Statement names by text: each connection parses and plans a statement once, then only binds and runs it. */
const NAMES = new Map<string, string>();
/** Distinct statement texts named at most (the texts are constants; a listing's few variants included): beyond, unnamed. */
const MAX_NAMES = 256;

/**
 * The name a statement is prepared under (node-postgres prepares a named statement once per connection): from its
 * text's hash, so one text always has one name and two texts never share one.
 */
export function statementName(text: string): string | undefined {
  let name = NAMES.get(text);
  if (name === undefined && NAMES.size < MAX_NAMES) {
    name = `g402_${createHash('sha256').update(text).digest('base64url').slice(0, 22)}`;
    NAMES.set(text, name);
  }
  return name;
}

/**
 * A store in a PostgreSQL database that any number of gate402 processes share. Every write is one statement, so one
 * transaction, acknowledged once committed (`synchronous_commit` on); the record writes of one turn of the event loop
 * share one statement (`group-commit.ts`); hot statements are prepared once per connection. Every read asks the
 * database, so a record or claim another process wrote is seen. The migrations in `migrations/` are applied before it opens.
 */
export async function openPostgresStore(url: string, opts: PostgresStoreOptions = {}): Promise<PostgresStore> {
  const poolSize = opts.poolSize ?? 10;
  const statementTimeoutMs = opts.statementTimeoutMs ?? 5000;
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5000,
    statement_timeout: statementTimeoutMs,
    // The client gives up a little after the server would: a lost connection does not hold a request forever.
    query_timeout: statementTimeoutMs + 1000,
    idle_in_transaction_session_timeout: statementTimeoutMs,
    keepAlive: true,
    application_name: 'gate402',
    options: '-c synchronous_commit=on',
  });
  const health = new WriteHealth(opts.failureMemoryMs, opts.onError);
  // An idle connection that breaks (the server restarted) is dropped by the pool and the next statement opens another:
  // the store is unhealthy only if that statement fails too.
  pool.on('error', () => {});
  const query = async <R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<R>> => {
    if (pool.waitingCount >= MAX_WAITING) throw new Error(`the data store is saturated: ${pool.waitingCount} statements wait for a connection`);
    const name = statementName(text);
    return pool.query<R>(name === undefined ? { text, values } : { name, text, values });
  };
  const read = async <R extends pg.QueryResultRow>(text: string, values: unknown[]) => {
    try {
      return await query<R>(text, values);
    } catch (err) {
      throw unavailableOr(err, health);
    }
  };
  // Each kind of lookup takes at most a quarter of the pool: the rest stays for the writes of payments under way.
  const lookups = Math.max(1, Math.floor(poolSize / 4));
  const sql: Sql = {
    read,
    recordOf: new GroupRead(async (collection, keys) => {
      const { rows } = await read<{ key: string; value: unknown }>(RECORDS_BY_KEYS, [collection, keys]);
      return new Map(rows.map((r) => [r.key, r.value]));
    }, lookups),
    holderOf: new GroupRead(async (space, keys) => {
      const { rows } = await read<{ key: string; holder: string }>(HOLDERS_BY_KEYS, [space, keys]);
      return new Map(rows.map((r) => [r.key, r.holder]));
    }, lookups),
    write: async <R extends pg.QueryResultRow>(text: string, values: unknown[]) => {
      const started = performance.now();
      try {
        const result = await query<R>(text, values);
        health.succeeded();
        opts.onCommit?.((performance.now() - started) / 1000);
        return result;
      } catch (err) {
        throw unavailableOr(err, health);
      }
    },
  };
  try {
    await migrate(pool);
  } catch (err) {
    await pool.end().catch(() => {});
    throw new Error(`the PostgreSQL store at ${redacted(url)} could not be opened: ${err instanceof Error ? err.message : String(err)}`);
  }
  const within = new WriteSet<string>();
  let fence: FenceSource = () => undefined;
  const group = new GroupCommit(
    async (text, values) => (await sql.write<UpsertRow>(text, values)).rows[0],
    opts.orders,
    (err) => !isUnavailable(err),
  );
  const claims = new GroupClaims(
    async (text, values) => (await sql.write<ClaimRow>(text, values)).rows[0],
    opts.orders,
    (err) => !isUnavailable(err),
  );
  const writer: Writer = { lease: () => fence(), orders: opts.orders, onRefused: opts.onRefused, group, claims };
  return {
    pool,
    kind: 'postgres',
    path: redacted(url),
    nonces: new PostgresClaims('nonces', sql, within, writer),
    claims: (name) => new PostgresClaims(`claims:${name}`, sql, within, writer),
    collection: <T>(name: string, o?: { fence?: FenceSource }) => new PostgresCollection<T>(name, sql, within, o?.fence ? { ...writer, lease: o.fence } : writer),
    atomically: async (write) => {
      const writes = within.gather(write);
      if (!writes.length) return;
      for (const r of await group.write(writes, fence())) opts.onRefused?.(r.collection, r.key, r.refused);
    },
    fence: (source) => {
      fence = source;
    },
    health: () => health.health(),
    probe: async () => {
      // Unfenced: it says whether the database takes writes, whoever holds what.
      if (health.probeDue()) await sql.write(PLAIN_UPSERT, ['health', 'probe', JSON.stringify(Date.now())]).catch(() => {});
      return health.health();
    },
    close: () => pool.end(),
  };
}

/**
 * The statement failed for want of the database (unreachable, shutting down, out of disk, a timeout), not for what it
 * carried: a data or constraint error (SQLSTATE classes 22 and 23) says nothing of the store's health.
 */
function isUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return !(typeof code === 'string' && /^2[23]/.test(code));
}

/** A failed statement's error: one for want of the database is told to `health` and thrown as {@link StoreUnavailable}. */
function unavailableOr(err: unknown, health: WriteHealth): unknown {
  if (!isUnavailable(err)) return err;
  health.failed(err);
  return err instanceof StoreUnavailable ? err : new StoreUnavailable(err);
}

/** The URL without its password, for messages and `Store.path`. */
export function redacted(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}
