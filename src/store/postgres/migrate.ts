import { readdirSync, readFileSync } from 'node:fs';
import type pg from 'pg';

/** `NNN-name.sql`: applied in the order of NNN, each once. */
const MIGRATION_FILE = /^(\d{3})-[a-z0-9-]+\.sql$/;
/** The advisory lock every gate402 node takes to migrate: two nodes starting together apply each migration once. */
const MIGRATION_LOCK = 4_024_020_016;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The migrations shipped in `migrations/`, in order. */
export function shippedMigrations(dir: URL = new URL('./migrations/', import.meta.url)): Migration[] {
  const out: Migration[] = [];
  for (const name of readdirSync(dir).sort()) {
    const m = MIGRATION_FILE.exec(name);
    if (!m) continue;
    const version = Number(m[1]);
    if (out.some((o) => o.version === version)) throw new Error(`two migrations numbered ${m[1]} in ${dir.pathname}`);
    out.push({ version, name, sql: readFileSync(new URL(name, dir), 'utf8') });
  }
  return out;
}

/**
 * Applies the migrations not applied yet, in one transaction under an advisory lock: a second node starting at the
 * same time waits, then finds them applied. Returns the names applied by this call.
 */
export async function migrate(pool: pg.Pool, migrations: Migration[] = shippedMigrations()): Promise<string[]> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    // A migration may rewrite a large table: the store's statement timeout is for requests, not this.
    await client.query("SET LOCAL statement_timeout = '10min'");
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
    const applied = new Set((await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    const done: string[] = [];
    for (const m of migrations) {
      if (applied.has(m.version)) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      done.push(m.name);
    }
    await client.query('COMMIT');
    return done;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
