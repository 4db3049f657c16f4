/**
 * The leases of a role one node of the cluster plays at a time (the stock desk, the channel claimer), taken and
 * renewed by the role itself through this node's leases, on a small connection pool of the role's own: a store busy
 * with requests never delays a renewal.
 */
import pg from 'pg';
import { BOOT } from '../cluster/boot.ts';
import type { ClusterNodeConfig } from '../cluster/join.ts';
import type { Logger } from '../log/logger.ts';
import { Leases } from '../store/postgres/leases.ts';

export function roleLeases(config: ClusterNodeConfig, role: string, log: Logger): { leases: Leases; termMs: number; node: string; close(): Promise<void> } {
  const pool = new pg.Pool({
    connectionString: config.url,
    max: 1,
    connectionTimeoutMillis: config.timeoutMs,
    query_timeout: config.timeoutMs,
    keepAlive: true,
    application_name: `gate402 ${role} lease`,
  });
  pool.on('error', (error) => log.warn(`a ${role} lease connection broke; the next renewal opens another`, { error }));
  return {
    leases: new Leases(pool, { node: config.nodeId, boot: BOOT }, { leaseMs: config.leaseMs, timeoutMs: config.timeoutMs }),
    termMs: config.leaseMs,
    node: config.nodeId,
    close: () => pool.end(),
  };
}
