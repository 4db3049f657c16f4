/**
 * The composition root's facilitator: the engine's HTTP face (/supported, /verify, /settle, /health), with the
 * public /metrics when it is served there, and the bazaar listing of the gateway's paid resources.
 */
import type { NetworkRegistry } from '../chain/networks.ts';
import type { RunningEngine } from '../engine/create-engine.ts';
import { facilitatorAdmissionConfigFromEnv } from '../facilitator/admission.ts';
import { facilitatorHttpConfigFromEnv } from '../facilitator/config.ts';
import { discoveryResourcesHandler } from '../facilitator/discovery-resources.ts';
import { type RunningFacilitator, runFacilitator } from '../facilitator/run-facilitator.ts';
import type { BazaarResource } from '../gateway/discovery/bazaar-resources.ts';
import type { HttpHandler } from '../http/server.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { Store } from '../store/open-store.ts';

export interface FacilitatorComposition {
  env: NodeJS.ProcessEnv;
  networks: NetworkRegistry;
  engine: RunningEngine;
  store: Store;
  /** The gateway's paid resources when this process runs the gateway too; a facilitator alone lists none. */
  listing(): readonly BazaarResource[] | Promise<readonly BazaarResource[]>;
  /** The stock desk's address: the open facilitator never pays it (it is paid through the gateway's stock API only). */
  desk: string | undefined;
  publicMetrics: Array<{ method: string; path: string; handler: HttpHandler }>;
  log: Logger;
  metrics: Metrics;
  /** How long a receiver's claim or sweep at /settle waits for its receipt before it is answered pending. */
  confirmMs: number;
}

export function composeFacilitator(c: FacilitatorComposition): Promise<RunningFacilitator> {
  const discovery = { method: 'GET', path: '/discovery/resources', handler: discoveryResourcesHandler(() => c.listing()) };
  return runFacilitator({
    running: c.engine,
    store: c.store,
    networks: c.networks,
    http: facilitatorHttpConfigFromEnv(c.env),
    log: c.log.child({ part: 'facilitator' }),
    metrics: c.metrics,
    confirmMs: c.confirmMs,
    extraRoutes: [...c.publicMetrics, discovery],
    admission: { config: facilitatorAdmissionConfigFromEnv(c.env), ...(c.desk ? { ownPayees: [c.desk] } : {}) },
  });
}
