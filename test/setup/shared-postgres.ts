/**
 * The PostgreSQL server a test run shares, as a process of its own: started detached by the `before` script
 * (test/setup/devnet-start.ts), it runs the embedded server, writes where it is (test/helpers/postgres.ts reads it),
 * and stops the server on SIGTERM (the `after` script) or after `argv[2]` seconds, a guard should no `after` come.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { startEmbeddedPostgres } from '../../src/store/postgres/embedded-server.ts';
import { SHARED_POSTGRES_DIR, SHARED_POSTGRES_FILE, type SharedPostgres } from '../helpers/postgres.ts';

rmSync(SHARED_POSTGRES_DIR, { recursive: true, force: true });
// Two cluster files of four nodes at once, each node with its pool, besides the store tests' own pools.
const server = await startEmbeddedPostgres({ dir: SHARED_POSTGRES_DIR, settings: { max_connections: '400' } });
const where: SharedPostgres = { pid: process.pid, url: server.url() };
writeFileSync(SHARED_POSTGRES_FILE, JSON.stringify(where));

let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await server.stop();
  rmSync(SHARED_POSTGRES_DIR, { recursive: true, force: true });
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
setTimeout(stop, Number(process.argv[2] ?? 1800) * 1000).unref();
// Keeps the process up until a signal or the guard.
setInterval(() => {}, 60_000);
