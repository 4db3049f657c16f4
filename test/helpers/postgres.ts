import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../../src/store/postgres/embedded-server.ts';
import { tempDir } from './temp-dir.ts';

export interface TestDatabase {
  /** A connection URL for a fresh, empty database of its own. */
  url: string;
  /** The server the database is on (e.g. to stop it, as an outage). */
  server: EmbeddedPostgres;
  /** Drops the database; the last one dropped stops the server and removes its directory. */
  stop(): Promise<void>;
}

/**
 * A fresh database on this test process's embedded PostgreSQL, which starts with the first call (under a second
 * after initdb) and stops when the last database is dropped, or as the process exits.
 */
export async function startPostgres(): Promise<TestDatabase> {
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
