/**
 * The composition root's store: opened once per process (LMDB in the data directory, or the shared PostgreSQL
 * database), measured by its own kind, and lent to the engine, the gateway and the stock desk. Closed last.
 */
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { openStore, type Store } from '../store/open-store.ts';
import type { StoreConfig } from '../store/store-config.ts';
import { RECORD_ORDERS } from './record-orders.ts';

export async function composeStore(config: StoreConfig, metrics: Metrics, log?: Logger): Promise<Store> {
  // The store says its kind once open; a write it reports before that (none is made while opening) is not measured.
  let opened: Store | undefined;
  const store = await openStore(config.location, {
    ...config.postgres,
    orders: RECORD_ORDERS,
    onCommit: (seconds) => {
      if (opened) metrics.storeCommit(opened.kind, seconds);
    },
    onError: () => {
      if (opened) metrics.storeError(opened.kind);
    },
    onRefused: (collection, key, refused) => {
      if (opened) metrics.storeBackwardWrite(opened.kind, collection);
      log?.warn('a late record write was refused: the stored record is at a later state', { collection, key, storedRank: refused.storedRank, rank: refused.rank });
    },
  });
  opened = store;
  metrics.declareStore(store.kind, Object.keys(RECORD_ORDERS));
  return store;
}
