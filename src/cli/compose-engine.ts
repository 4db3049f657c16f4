/**
 * The composition root's settlement engine, on what the root opened for it: the store first, then this node's place
 * in the cluster (its relayer leases, and the desk's when it runs the desk), then the engine, which resumes what the
 * store left unfinished. Each is closed in the reverse order: the engine stops, the node's leases expire for another
 * node to finish what was in flight, the store closes last.
 */
import type { LocalAccount } from 'viem/accounts';
import type { NetworkRegistry } from '../chain/networks.ts';
import type { ClusterNode, ClusterNodeConfig } from '../cluster/join.ts';
import { createEngine, type EngineConfig, type RunningEngine } from '../engine/create-engine.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { Store } from '../store/open-store.ts';
import type { PriceFloors } from '../policy/price-floor.ts';
import { composeCluster } from './compose-cluster.ts';
import { composeStore } from './compose-store.ts';

export interface EngineComposition {
  networks: NetworkRegistry;
  config: EngineConfig;
  relayers: readonly LocalAccount[];
  /** The cluster to join (the store is shared), or undefined: this node runs alone. */
  cluster: ClusterNodeConfig | undefined;
  /** The stock desk's address, when this node runs the desk (its lease is taken with the relayers'). */
  desk: string | undefined;
  floors: PriceFloors;
  log: Logger;
  metrics: Metrics;
  closeLater(close: () => Promise<void>): void;
}

export async function composeEngine(c: EngineComposition): Promise<{ store: Store; cluster: ClusterNode | undefined; engine: RunningEngine }> {
  const store = await composeStore(c.config.store, c.metrics, c.log.child({ part: 'store' }));
  c.closeLater(() => store.close());
  const cluster = await composeCluster({ config: c.cluster, relayers: c.relayers.map((a) => a.address), ...(c.desk ? { desk: c.desk } : {}), log: c.log });
  if (cluster) c.closeLater(() => cluster.close());
  // Fenced: the store's writes carry this node's lease (src/store/fence.ts) before the engine resumes anything.
  if (cluster) store.fence(cluster.membership.fence);
  const engine = await createEngine({
    networks: c.networks,
    config: c.config,
    store,
    relayers: c.relayers,
    ...(cluster && c.cluster ? { cluster: { node: c.cluster.nodeId, membership: cluster.membership } } : {}),
    floor: c.floors,
    log: c.log.child({ part: 'engine' }),
    metrics: c.metrics,
  });
  c.closeLater(() => engine.close());
  // A node whose lease may be gone signs and sends nothing (see `Membership.signing`).
  if (cluster) for (const pool of engine.relayers.values()) pool.guardWith(cluster.membership.signing);
  return { store, cluster, engine };
}
