import { mkdirSync } from 'node:fs';
import { open, type Database, type RootDatabase } from 'lmdb';
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
  close(): Promise<void>;
}

/** Resolves once `write` is committed and flushed to disk. */
export type Durable = <T>(write: Promise<T>) => Promise<T>;

/** `onCommit` is told how long each durable write took, from the write until it was on disk (metrics). */
export function openStore(path: string, opts: { onCommit?: (seconds: number) => void } = {}): Store {
  mkdirSync(path, { recursive: true });
  const root: RootDatabase = open({ path, compression: false, maxDbs: 32 });
  const dbs = new Map<string, Database>();
  const db = (name: string): Database => {
    let d = dbs.get(name);
    if (!d) {
      d = root.openDB({ name, encoding: 'msgpack' });
      dbs.set(name, d);
    }
    return d;
  };
  const durable: Durable = async (write) => {
    const started = performance.now();
    const result = await write;
    await root.flushed;
    opts.onCommit?.((performance.now() - started) / 1000);
    return result;
  };
  return {
    path,
    nonces: new NonceClaims(db('nonces'), durable),
    claims: (name: string) => new NonceClaims(db(`claims:${name}`), durable),
    collection: <T>(name: string) => new DurableCollection<T>(db(name), durable),
    atomically: async (write) => {
      await durable(root.transaction(write));
    },
    close: () => root.close(),
  };
}
