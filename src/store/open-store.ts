import { mkdirSync } from 'node:fs';
import { open, type Database, type RootDatabase, type RootDatabaseOptionsWithPath } from 'lmdb';
import { ok, type Err, type Failure, type Ok } from '../protocol/result.ts';
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
  /**
   * Not ok while the last durable write failed (a full disk, an I/O error), and for a while after any write failed:
   * on a nearly full disk small writes may still pass while larger ones fail.
   */
  health(): StoreHealth;
  /** {@link health}, after trying a small durable write when the store is failing (at most once a second). */
  probe(): Promise<StoreHealth>;
  close(): Promise<void>;
}

/** Why the store is not healthy: the last failed write's error as the message, and since when (ms since the epoch). */
export interface StoreFailure extends Failure<'store_unwritable'> {
  since: number;
}

export type StoreHealth = Ok<undefined> | Err<StoreFailure>;

const unwritable = (failure: { error: string; since: number }): Err<StoreFailure> => ({ ok: false, error: { code: 'store_unwritable', message: failure.error, since: failure.since } });

export interface StoreOptions {
  /** Told how long each durable write took, from the write until it was on disk (metrics). */
  onCommit?: (seconds: number) => void;
  /** Told of each durable write that failed (metrics). */
  onError?: () => void;
  /** How long a failed write keeps the store unhealthy after writes succeed again (default 60 s). */
  failureMemoryMs?: number;
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
  guardCommitRejections();
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
  /** The current run of failed writes, if the last write failed. */
  let failing: { error: string; since: number } | undefined;
  /** The last failure, remembered for `failureMemoryMs`. */
  let lastFailure: { error: string; since: number; at: number } | undefined;
  let probedAt = 0;
  const failureMemoryMs = opts.failureMemoryMs ?? 60_000;
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
      lastFailure = { ...failing, at: Date.now() };
      opts.onError?.();
      // lmdb rejects a failed commit's cause (`commitError`) in a promise of its own: handled here, with the write.
      (err as { commitError?: Promise<unknown> } | undefined)?.commitError?.catch(() => {});
      throw err;
    }
  };
  const health = (): StoreHealth => {
    if (failing !== undefined) return unwritable(failing);
    if (lastFailure !== undefined && Date.now() - lastFailure.at < failureMemoryMs) return unwritable(lastFailure);
    return ok(undefined);
  };
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

let guarding = false;

/**
 * When a commit fails (disk full, I/O error), lmdb rejects each write of the transaction, which its caller handles,
 * and also internal promises nobody can hold, which would be unhandled rejections and, by Node's default, end the
 * process. Those (recognised by lmdb's `commitError`) are ignored: the failure reaches the writes' callers and the
 * store's health. Any other unhandled rejection is thrown on, as Node would.
 */
function guardCommitRejections(): void {
  if (guarding) return;
  guarding = true;
  process.on('unhandledRejection', (reason) => {
    if (reason instanceof Error && 'commitError' in reason) return;
    throw reason;
  });
}
