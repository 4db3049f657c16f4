/**
 * The composition root's merchant registry: on the given store, with the live price floor, and, in a cluster, told
 * of every other node's change within a round trip (each node keeps merchants in memory).
 */
import type { NetworkRegistry } from '../chain/networks.ts';
import type { ClusterNode } from '../cluster/join.ts';
import type { MerchantConfig } from '../gateway/merchants/config.ts';
import { MerchantRegistry } from '../gateway/merchants/registry.ts';
import type { Logger } from '../log/logger.ts';
import type { Store } from '../store/open-store.ts';
import type { PriceFloors } from '../policy/price-floor.ts';

/** The channel merchant changes are told on, named by slug (by the store's trigger, in the writing transaction). */
const MERCHANT_CHANNEL = 'gate402_merchants';

export interface MerchantComposition {
  config: MerchantConfig;
  store: Store;
  cluster: ClusterNode | undefined;
  networks: NetworkRegistry;
  upstreamAllowlist: string[];
  floors: PriceFloors;
  log: Logger;
}

export async function composeMerchants(c: MerchantComposition): Promise<MerchantRegistry> {
  const { cluster } = c;
  const registry = new MerchantRegistry({
    store: c.store,
    networks: c.networks,
    filesDir: c.config.filesDir,
    upstreamAllowlist: c.upstreamAllowlist,
    limits: c.config.limits,
    uploadBudgets: c.config.uploadBudgets,
    maxMerchantsPerWallet: c.config.maxMerchantsPerWallet,
    size: c.config.size,
    priceFloor: c.floors,
    log: c.log.child({ part: 'merchants' }),
    // On a shared store the write's own transaction tells every node (a trigger's NOTIFY on MERCHANT_CHANNEL, see
    // src/store/postgres/migrations/073-merchant-change-notices.sql); a lost notification is caught by revalidation.
    ...(cluster ? { revalidateMs: c.config.revalidateMs } : {}),
  });
  // Every node keeps merchants in memory: a change another node made drops it here, within a round trip.
  await cluster?.listener.subscribe(MERCHANT_CHANNEL, { changed: (slug) => registry.forget(slug), resync: () => registry.forget() });
  return registry;
}
