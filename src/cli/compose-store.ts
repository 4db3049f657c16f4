/**
 * The composition root's store: opened once per process (LMDB in the data directory, or the shared PostgreSQL
 * database), measured by its own kind, and lent to the engine, the gateway and the stock desk. Closed last.
 */
import type { Metrics } from '../metrics/metrics.ts';
import { openStore, type Store } from '../store/open-store.ts';
import type { StoreConfig } from '../store/store-config.ts';

export async function composeStore(config: StoreConfig, metrics: Metrics): Promise<Store> {
  // The store says its kind once open; a write it reports before that (none is made while opening) is not measured.
  let opened: Store | undefined;
  const store = await openStore(config.location, {
    ...config.postgres,
    onCommit: (seconds) => {
      if (opened) metrics.storeCommit(opened.kind, seconds);
    },
    onError: () => {
      if (opened) metrics.storeError(opened.kind);
    },
  });
  opened = store;
  metrics.declareStore(store.kind);
  return store;
}
