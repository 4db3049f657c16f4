/**
 * The composition root's cluster: joined when the store is shared (`GATE402_STORE_URL`), with the leases of this
 * node's relayer keys (and the stock desk's key when this node runs the desk), before the engine resumes anything.
 * A node that loses a lease stops at once: signing on with a key another node may hold now would race it for nonces.
 * Its supervisor starts it again (`gate402 cluster`: `cluster/node-supervisor.ts`), and it rejoins with a new epoch.
 */
import { BOOT } from '../cluster/boot.ts';
import { type ClusterNode, type ClusterNodeConfig, joinCluster } from '../cluster/join.ts';
import type { Logger } from '../log/logger.ts';

export interface ClusterParts {
  config: ClusterNodeConfig | undefined;
  /** This node's relayer addresses. */
  relayers: readonly string[];
  /** The stock desk's address, when this node runs the desk. */
  desk?: string;
  log: Logger;
}

export async function composeCluster(parts: ClusterParts): Promise<ClusterNode | undefined> {
  if (!parts.config) return undefined;
  const log = parts.log;
  return joinCluster({
    config: parts.config,
    boot: BOOT,
    relayers: parts.relayers,
    ...(parts.desk ? { desk: parts.desk } : {}),
    log: log.child({ part: 'cluster' }),
    onLost: (why: string) => {
      log.error('stopping: this node lost its leases', { why });
      process.exit(1);
    },
  });
}
