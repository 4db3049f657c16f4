/**
 * The composition root's stock desk in a cluster: the desk lease is taken (and renewed) by the desk itself, through
 * this node's leases on a small connection pool of their own (`compose-role-leases.ts`), so that every gateway node
 * can have the desk and one runs it (see `stock/desk-lease.ts`). A node that loses the desk lease stops at once, as
 * for its other leases.
 */
import { clusterNodeConfigFromEnv, type ClusterNode } from '../cluster/join.ts';
import type { Logger } from '../log/logger.ts';
import type { DeskCluster } from '../stock/create-stock-desk.ts';
import { deskLease } from '../store/postgres/leases.ts';
import { roleLeases } from './compose-role-leases.ts';

export function composeDeskCluster(env: NodeJS.ProcessEnv, cluster: ClusterNode | undefined, log: Logger): DeskCluster | undefined {
  const config = cluster ? clusterNodeConfigFromEnv(env) : undefined;
  if (!cluster || !config) return undefined;
  const { leases, termMs, close } = roleLeases(config, 'desk', log);
  return {
    leases,
    leaseName: deskLease,
    termMs,
    notify: (channel, payload) => cluster.notify(channel, payload),
    subscribe: (channel, subscriber) => cluster.listener.subscribe(channel, subscriber),
    onLost: (why) => {
      log.error('stopping: this node lost the stock desk lease', { why });
      process.exit(1);
    },
    close,
  };
}
