import { mkdirSync } from 'node:fs';
import { open, type Database, type RootDatabase, type RootDatabaseOptionsWithPath } from 'lmdb';
import { DurableCollection } from './durable-collection.ts';
import { NonceClaims } from './nonce-claims.ts';

/**
 * The one LMDB environment of a gate402 process. Writes from concurrent requests share a transaction and one
 * disk flush (lmdb-js batches them), so durability never costs an fsync per request.
 */
export interface Store {
  readonly path: string;
  /** Payment nonces claimed before simulation: one key per on-chain nonce, forever. */
  readonly nonces: NonceClaims;
  /** Another named set of atomic claims (e.g. which payments have been served upstream). */
  claims(name: string): NonceClaims;
  /** Open a named collection of durable records (payments, orders, sponsorships, ...). */
  collection<T>(name: string): DurableCollection<T>;
  /** Runs `write` (its writes made with `putWithin`, in any collections) as one transaction, durably: all or nothing. */
  atomically(write: () => void): Promise<void>;
  /** Whether the last durable write succeeded (a full disk, an I/O error: not ok until a write succeeds again). */
  health(): StoreHealth;
  /** {@link health}, after trying a small durable write when the store is failing (at most once a second). */
  probe(): Promise<StoreHealth>;
  close(): Promise<void>;
}

export type StoreHealth = { ok: true } | { ok: false; error: string; since: number };

export interface StoreOptions {
  /** Told how long each durable write took, from the write until it was on disk (metrics). */
  onCommit?: (seconds: number) => void;
  /** Opens the LMDB environment; `lmdb`'s `open` unless given (tests give one whose writes fail). */
  openLmdb?: (options: RootDatabaseOptionsWithPath) => RootDatabase;
}

/** Resolves once `write` is committed and flushed to disk. */
export type Durable = <T>(write: Promise<T>) => Promise<T>;

/**
 * `path` is a directory (created if missing; an existing one, e.g. a mounted volume, is used as it is, whatever its
 * name: lmdb would otherwise take a name with a dot, `data.v1`, for a file).
 *
 * A write that fails (disk full, I/O error) rejects its own promise, and only that: callers decide what it means for
 * their record, and the store reports itself unhealthy until a write succeeds again.
 */
export function openStore(path: string, opts: StoreOptions = {}): Store {
  mkdirSync(path, { recursive: true });
  const root: RootDatabase = (opts.openLmdb ?? open)({ path, noSubdir: false, compression: false, maxDbs: 32 });
  const dbs = new Map<string, Database>();
  const db = (name: string): Database => {
    let d = dbs.get(name);
    if (!d) {
      d = root.openDB({ name, encoding: 'msgpack' });
      dbs.set(name, d);
    }
    return d;
  };
  let failing: { error: string; since: number } | undefined;
  let probedAt = 0;
  const durable: Durable = async (write) => {
    const started = performance.now();
    try {
      const result = await write;
      await root.flushed;
      failing = undefined;
      opts.onCommit?.((performance.now() - started) / 1000);
      return result;
    } catch (err) {
      failing ??= { error: err instanceof Error ? err.message : String(err), since: Date.now() };
      throw err;
    }
  };
  const health = (): StoreHealth => (failing === undefined ? { ok: true } : { ok: false, ...failing });
  return {
    path,
    nonces: new NonceClaims(db('nonces'), durable),
    claims: (name: string) => new NonceClaims(db(`claims:${name}`), durable),
    collection: <T>(name: string) => new DurableCollection<T>(db(name), durable),
    atomically: async (write) => {
      await durable(root.transaction(write));
    },
    health,
    probe: async () => {
      if (failing !== undefined && Date.now() - probedAt >= 1000) {
        probedAt = Date.now();
        await (async () => durable(db('health').put('probe', probedAt)))().catch(() => {});
      }
      return health();
    },
    close: () => root.close(),
  };
}
