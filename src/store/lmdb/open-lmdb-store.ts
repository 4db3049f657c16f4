import { mkdirSync } from 'node:fs';
import { open, type Database, type RootDatabase, type RootDatabaseOptionsWithPath } from 'lmdb';
import { backward, type RecordOrder } from '../record-order.ts';
import { StoreUnavailable } from '../store-unavailable.ts';
import type { Store, StoreOptions } from '../store.ts';
import { WriteHealth } from '../write-health.ts';
import { WriteSet } from '../write-set.ts';
import { LmdbClaims } from './lmdb-claims.ts';
import { LmdbCollection } from './lmdb-collection.ts';

export interface LmdbStoreOptions extends StoreOptions {
  /** Opens the LMDB environment; `lmdb`'s `open` unless given (tests give one whose writes fail). */
  openLmdb?: (options: RootDatabaseOptionsWithPath) => RootDatabase;
}

/**
 * Makes `write` and resolves once it is committed and flushed to disk. Once the store is closing, refuses it
 * ({@link StoreUnavailable}) without making it: lmdb-js would queue it for a commit that runs after the environment
 * closed, and that throws where nothing can catch it, ending the process.
 */
export type Durable = <T>(write: () => Promise<T>) => Promise<T>;

/**
 * The one LMDB environment of a gate402 process. Writes from concurrent requests share a transaction and one
 * disk flush (lmdb-js batches them), so durability never costs an fsync per request.
 *
 * `path` is a directory (created if missing; an existing one, e.g. a mounted volume, is used as it is, whatever its
 * name: lmdb would otherwise take a name with a dot, `data.v1`, for a file).
 *
 * A write that fails (disk full, I/O error) rejects its own promise, and only that: callers decide what it means for
 * their record, and the store reports itself unhealthy until a write succeeds again.
 */
export function openLmdbStore(path: string, opts: LmdbStoreOptions = {}): Store {
  guardCommitRejections();
  mkdirSync(path, { recursive: true });
  const root: RootDatabase = (opts.openLmdb ?? open)({ path, noSubdir: false, compression: false, maxDbs: 32 });
  const dbs = new Map<string, Database>();
  /** The ordered collections' databases: their name and rank, for the writes `atomically` makes in them. */
  const ordered = new Map<Database, { name: string; order: RecordOrder<unknown> }>();
  const db = (name: string): Database => {
    let d = dbs.get(name);
    if (!d) {
      d = root.openDB({ name, encoding: 'msgpack' });
      dbs.set(name, d);
      const order = opts.orders?.[name] as RecordOrder<unknown> | undefined;
      if (order) ordered.set(d, { name, order });
    }
    return d;
  };
  const health = new WriteHealth(opts.failureMemoryMs, opts.onError);
  let closing = false;
  const durable: Durable = async (write) => {
    if (closing) throw new StoreUnavailable(new Error('the store is closed: this process is stopping'));
    const started = performance.now();
    try {
      const result = await write();
      await root.flushed;
      health.succeeded();
      opts.onCommit?.((performance.now() - started) / 1000);
      return result;
    } catch (err) {
      health.failed(err);
      // lmdb rejects a failed commit's cause (`commitError`) in a promise of its own: handled here, with the write.
      (err as { commitError?: Promise<unknown> } | undefined)?.commitError?.catch(() => {});
      throw err;
    }
  };
  const within = new WriteSet<Database>();
  return {
    kind: 'lmdb',
    path,
    nonces: new LmdbClaims(db('nonces'), durable, within),
    claims: (name: string) => new LmdbClaims(db(`claims:${name}`), durable, within),
    collection: <T>(name: string) => new LmdbCollection<T>(db(name), durable, within, opts.orders?.[name] as RecordOrder<T> | undefined, (key, refused) => opts.onRefused?.(name, key, refused)),
    atomically: async (write) => {
      const writes = within.gather(write);
      await durable(() =>
        root.transaction(() => {
          for (const w of writes) {
            const o = ordered.get(w.target);
            const refused = o ? backward(o.order, w.target.get(w.key), w.value) : undefined;
            // A backward record is left out (and told), the others are written.
            if (refused) queueMicrotask(() => opts.onRefused?.(o?.name as string, w.key, refused));
            else void w.target.put(w.key, w.value);
          }
        }),
      );
    },
    // One node's own environment: nothing else writes it, so there is nothing to fence.
    fence: () => {},
    health: () => health.health(),
    probe: async () => {
      if (health.probeDue()) await durable(() => db('health').put('probe', Date.now())).catch(() => {});
      return health.health();
    },
    close: () => {
      closing = true;
      return root.close();
    },
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
