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
  close(): Promise<void>;
}

export function openStore(path: string): Store {
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
  const flushed = async (): Promise<void> => {
    await root.flushed;
  };
  return {
    path,
    nonces: new NonceClaims(db('nonces'), flushed),
    claims: (name: string) => new NonceClaims(db(`claims:${name}`), flushed),
    collection: <T>(name: string) => new DurableCollection<T>(db(name), flushed),
    close: () => root.close(),
  };
}
