/**
 * The composition root's stock desk in a cluster: the desk lease is taken (and renewed) by the desk itself, through
 * this node's leases on a small connection pool of their own, so that every gateway node can have the desk and one
 * runs it (see `stock/desk-lease.ts`). A node that loses the desk lease stops at once, as for its other leases.
 */
import pg from 'pg';
import { BOOT } from '../cluster/boot.ts';
import { clusterNodeConfigFromEnv, type ClusterNode } from '../cluster/join.ts';
import type { Logger } from '../log/logger.ts';
import type { DeskCluster } from '../stock/create-stock-desk.ts';
import { deskLease, Leases } from '../store/postgres/leases.ts';

export function composeDeskCluster(env: NodeJS.ProcessEnv, cluster: ClusterNode | undefined, log: Logger): DeskCluster | undefined {
  const config = cluster ? clusterNodeConfigFromEnv(env) : undefined;
  if (!cluster || !config) return undefined;
  const pool = new pg.Pool({
    connectionString: config.url,
    max: 1,
    connectionTimeoutMillis: config.timeoutMs,
    query_timeout: config.timeoutMs,
    keepAlive: true,
    application_name: 'gate402 desk lease',
  });
  pool.on('error', (error) => log.warn('a desk lease connection broke; the next renewal opens another', { error }));
  return {
    leases: new Leases(pool, { node: config.nodeId, boot: BOOT }, { leaseMs: config.leaseMs, timeoutMs: config.timeoutMs }),
    leaseName: deskLease,
    termMs: config.leaseMs,
    notify: (channel, payload) => cluster.notify(channel, payload),
    subscribe: (channel, subscriber) => cluster.listener.subscribe(channel, subscriber),
    onLost: (why) => {
      log.error('stopping: this node lost the stock desk lease', { why });
      process.exit(1);
    },
    close: () => pool.end(),
  };
}
