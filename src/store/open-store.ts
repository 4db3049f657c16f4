import { openLmdbStore } from './lmdb/open-lmdb-store.ts';
import { openPostgresStore, type PostgresStoreOptions } from './postgres/open-postgres-store.ts';
import type { Store } from './store.ts';

export type { Store, StoreFailure, StoreHealth, StoreKind, StoreOptions } from './store.ts';

export interface StoreLocation {
  /** The LMDB directory, used when there is no `url`. */
  dataDir: string;
  /** A PostgreSQL URL (`GATE402_STORE_URL`): the records go there, shared with every process given the same URL. */
  url?: string;
}

/** The one place a store is picked: PostgreSQL when a URL is given, else LMDB in `dataDir`. */
export async function openStore(location: StoreLocation, opts: PostgresStoreOptions = {}): Promise<Store> {
  if (location.url) return openPostgresStore(location.url, opts);
  return openLmdbStore(location.dataDir, opts);
}
