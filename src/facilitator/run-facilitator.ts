import type { NetworkRegistry } from '../chain/networks.ts';
import type { RunningEngine } from '../engine/create-engine.ts';
import type { HttpHandler } from '../http/server.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { facilitatorAdmissionConfigFromEnv, PaymentAdmission, type FacilitatorAdmissionConfig } from './admission.ts';
import type { FacilitatorHttpConfig } from './config.ts';
import { startFacilitatorHttp } from './http-app.ts';
import { settlementService } from './settlement-service.ts';

export interface RunningFacilitator {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** The settlement engine behind the facilitator's HTTP routes. The engine is the caller's: the gateway may share it. */
export async function runFacilitator(
  running: RunningEngine,
  networks: NetworkRegistry,
  http: FacilitatorHttpConfig,
  log: Logger,
  metrics: Metrics,
  extraRoutes: Array<{ method: string; path: string; handler: HttpHandler }> = [],
  admission: { config: FacilitatorAdmissionConfig; ownPayees?: readonly string[] } = { config: facilitatorAdmissionConfigFromEnv({}) },
): Promise<RunningFacilitator> {
  const health = async () => {
    const store = await running.store.probe();
    if (!store.ok) throw new Error(`the data store cannot write (since ${new Date(store.error.since).toISOString()})`);
    const chains = await Promise.all(
      networks.all().map(async (n) => {
        const pool = running.relayers.get(n.caip2);
        const balances = pool ? await pool.refreshBalances() : [];
        return [n.caip2, { relayers: balances.map((b) => ({ address: b.address, balanceWei: b.balance.toString(), inFlight: b.inFlight })) }] as const;
      }),
    );
    return { inFlight: running.engine.inFlight, networks: Object.fromEntries(chains) };
  };
  const door = new PaymentAdmission(
    { policy: running.engine.policy, precheck: (request, policy) => running.engine.precheck(request, policy), ...(admission.ownPayees ? { ownPayees: admission.ownPayees } : {}) },
    admission.config,
  );
  const server = await startFacilitatorHttp(
    settlementService(
      running.engine,
      networks,
      http.maxBodyBytes,
      health,
      door,
      (route, err) => log.error(`facilitator: unexpected ${route} error`, { error: err }),
      (network, reason) => metrics.paymentShed(network, reason),
    ),
    {
      host: http.host,
      port: http.port,
      maxBodyBytes: http.maxBodyBytes,
      rateLimit: http.rateLimit,
      trustProxy: http.trustProxy,
      log: (line) => log.error(line),
      observe: metrics.httpObserver('facilitator'),
      extraRoutes,
    },
  );
  const url = `http://${http.host}:${server.port}`;
  log.info('facilitator listening', { url });
  return {
    url,
    port: server.port,
    async close() {
      await server.close();
    },
  };
}
