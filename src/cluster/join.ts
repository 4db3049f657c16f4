import pg from 'pg';
import type { Logger } from '../log/logger.ts';
import { storeConfigFromEnv } from '../store/store-config.ts';
import { deskLease, relayerLease } from '../store/postgres/leases.ts';
import { ChangeListener, notify } from '../store/postgres/notifications.ts';
import { type ClusterConfig, clusterConfigFromEnv, Membership } from './membership.ts';

export interface ClusterNodeConfig extends ClusterConfig {
  /** The shared store (GATE402_STORE_URL): without it there is no cluster, and the node runs alone. */
  url: string;
}

/** The cluster settings, or undefined when no shared store is configured (the embedded default runs alone). */
export function clusterNodeConfigFromEnv(env: NodeJS.ProcessEnv = process.env): ClusterNodeConfig | undefined {
  const url = storeConfigFromEnv(env, '').location.url;
  if (!url) return undefined;
  return { url, ...clusterConfigFromEnv(env) };
}

export interface ClusterNode {
  membership: Membership;
  /** Hears the other nodes' changes (LISTEN). */
  listener: ChangeListener;
  /** Tells every node (this one too) that `payload` of `channel` changed (NOTIFY). */
  notify(channel: string, payload: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Joins the cluster: its leases are taken through a small connection pool of their own, so that a store busy with
 * requests never delays a renewal. Throws `LeaseRefused` (its message says which key, and which node holds it).
 */
export async function joinCluster(opts: { config: ClusterNodeConfig; boot: string; relayers: readonly string[]; desk?: string; log: Logger; onLost(why: string): void }): Promise<ClusterNode> {
  const { config } = opts;
  const pool = new pg.Pool({ connectionString: config.url, max: 2, connectionTimeoutMillis: config.timeoutMs, query_timeout: config.timeoutMs, keepAlive: true, application_name: 'gate402 leases' });
  pool.on('error', (error) => opts.log.warn('a lease connection broke; the next renewal opens another', { error }));
  try {
    const membership = await Membership.join({
      db: pool,
      config,
      boot: opts.boot,
      leases: [...opts.relayers.map(relayerLease), ...(opts.desk ? [deskLease(opts.desk)] : [])],
      log: opts.log,
      onLost: opts.onLost,
    });
    const listener = new ChangeListener({ url: config.url, log: opts.log, timeoutMs: config.timeoutMs });
    await listener.start().catch(async (error: unknown) => {
      await membership.stop();
      throw error;
    });
    return {
      membership,
      listener,
      notify: (channel, payload) => notify(pool, channel, payload, config.timeoutMs),
      async close() {
        await listener.stop();
        await membership.stop();
        await pool.end();
      },
    };
  } catch (error) {
    await pool.end();
    throw error;
  }
}
