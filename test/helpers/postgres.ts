import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { databaseAdmin, type EmbeddedPostgres, startEmbeddedPostgres } from '../../src/store/postgres/embedded-server.ts';
import { stopProcess, tempDir } from './temp-dir.ts';

/**
 * The run's shared PostgreSQL server (test/setup/shared-postgres.ts), beside the run's devnet: a directory per
 * run, so two runs side by side do not share it.
 */
export const SHARED_POSTGRES_DIR = resolve(process.env.GATE402_TEST_DEVNET_DIR ?? '.tap/devnet', '..', 'postgres');
export const SHARED_POSTGRES_FILE = resolve(SHARED_POSTGRES_DIR, '..', 'postgres.json');

export interface SharedPostgres {
  /** The process that holds the server. */
  pid: number;
  /** The admin connection URL (database `postgres`). */
  url: string;
}

/**
 * A connection pool for a test's own statements. `end()` does not wait for the pool's connections to close, so a
 * database dropped (or a server stopped) right after ends some of them from the server's side (57P01): an idle
 * connection's error is emitted on its pool, and an unhandled one ended the test process after its last assertion.
 * Such errors are ignored here; a statement's own error still rejects it.
 */
export function testPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => {});
  return pool;
}

export interface TestDatabase {
  /** A connection URL for a fresh, empty database of its own. */
  url: string;
  /** The server the database is on (e.g. to stop it, as an outage). */
  server: EmbeddedPostgres;
  /** Drops the database; the last one dropped stops the server and removes its directory. */
  stop(): Promise<void>;
}

/**
 * A fresh database, on the run's shared server when there is one (started by the `before` script: a server per
 * test file cost 1.6 CPU s, initdb and start), else on this test process's embedded PostgreSQL, which starts with
 * the first call and stops when the last database is dropped, or as the process exits. `own` asks for the latter:
 * a test that stops and restarts its server (an outage) must not take the run's down.
 */
export async function startPostgres(opts: { own?: boolean } = {}): Promise<TestDatabase> {
  const shared = opts.own ? undefined : sharedServer();
  if (shared) {
    const name = `t_${randomBytes(6).toString('hex')}`;
    const url = await shared.createDatabase(name);
    let stopped = false;
    return {
      url,
      server: shared,
      stop: async () => {
        if (stopped) return;
        stopped = true;
        await shared.dropDatabase(name).catch(() => {});
      },
    };
  }
  const held = await acquire();
  const name = `t_${randomBytes(6).toString('hex')}`;
  let url: string;
  try {
    url = await held.server.createDatabase(name);
  } catch (err) {
    await release(held);
    throw err;
  }
  let stopped = false;
  return {
    url,
    server: held.server,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await held.server.dropDatabase(name).catch(() => {});
      await release(held);
    },
  };
}

interface Held {
  server: EmbeddedPostgres;
  dir: string;
  users: number;
}

let current: Promise<Held> | undefined;
/** The previous server's shutdown, which a new start waits for. */
let stopping: Promise<void> = Promise.resolve();

async function acquire(): Promise<Held> {
  if (!current) {
    current = stopping.then(async () => {
      const dir = tempDir('pg');
      const server = await startEmbeddedPostgres({ dir, settings: { max_connections: '200' } });
      return { server, dir, users: 0 };
    });
    current.catch(() => {
      current = undefined;
    });
  }
  const held = await current;
  held.users++;
  return held;
}

async function release(held: Held): Promise<void> {
  held.users--;
  if (held.users > 0) return;
  current = undefined;
  stopping = held.server.stop().then(() => rmSync(held.dir, { recursive: true, force: true }));
  await stopping;
}

/** The run's shared server, when its holder is running: databases on it come and go; it is never stopped here. */
function sharedServer(): EmbeddedPostgres | undefined {
  if (!existsSync(SHARED_POSTGRES_FILE)) return undefined;
  const where = JSON.parse(readFileSync(SHARED_POSTGRES_FILE, 'utf8')) as SharedPostgres;
  try {
    process.kill(where.pid, 0);
  } catch {
    return undefined;
  }
  const base = new URL(where.url);
  const url = (database = 'postgres'): string => {
    const u = new URL(base);
    u.pathname = `/${encodeURIComponent(database)}`;
    return u.toString();
  };
  const refuse = async (): Promise<never> => {
    throw new Error("the run's shared PostgreSQL server is not this test's to stop: use startPostgres({ own: true })");
  };
  return {
    port: Number(base.port),
    dataDir: join(SHARED_POSTGRES_DIR, 'data'),
    url,
    ...databaseAdmin(url),
    stop: refuse,
    restart: refuse,
  };
}

/** Starts the run's shared server in a detached process of its own (the `before` script) and waits until it is up. */
export async function spawnSharedPostgres(exitAfterSeconds: number): Promise<void> {
  rmSync(SHARED_POSTGRES_FILE, { force: true });
  const child = spawn(process.execPath, [...process.execArgv, resolve('test/setup/shared-postgres.ts'), String(exitAfterSeconds)], { stdio: 'ignore', detached: true });
  child.unref();
  const deadline = Date.now() + 120_000;
  while (!existsSync(SHARED_POSTGRES_FILE)) {
    if (child.exitCode !== null) throw new Error(`the shared PostgreSQL server exited with ${child.exitCode}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error('the shared PostgreSQL server did not start in 2 minutes');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Stops the run's shared server (the `after` script). */
export async function stopSharedPostgres(): Promise<void> {
  if (!existsSync(SHARED_POSTGRES_FILE)) return;
  const { pid } = JSON.parse(readFileSync(SHARED_POSTGRES_FILE, 'utf8')) as SharedPostgres;
  rmSync(SHARED_POSTGRES_FILE, { force: true });
  await stopProcess(pid);
}
