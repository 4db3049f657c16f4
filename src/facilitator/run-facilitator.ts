import type { NetworkRegistry } from '../chain/networks.ts';
import type { RunningEngine } from '../engine/create-engine.ts';
import type { HttpHandler } from '../http/server.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { Store } from '../store/open-store.ts';
import { facilitatorAdmissionConfigFromEnv, PaymentAdmission, type FacilitatorAdmissionConfig } from './admission.ts';
import type { FacilitatorHttpConfig } from './config.ts';
import { startFacilitatorHttp } from './http-app.ts';
import { channelOperations } from './channel-operations.ts';
import { settlementService } from './settlement-service.ts';

export interface RunningFacilitator {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** What the facilitator serves from: the engine (the caller's: the gateway may share it), and the store it writes to. */
export interface FacilitatorParts {
  /** The engine and its relayers (their balances are on /health). */
  running: Pick<RunningEngine, 'engine' | 'relayers' | 'chain'>;
  /** The store the engine writes to (/health says whether it can), and where receivers' claims and sweeps are recorded. */
  store: Pick<Store, 'probe' | 'collection' | 'claims'>;
  networks: NetworkRegistry;
  http: FacilitatorHttpConfig;
  log: Logger;
  metrics: Metrics;
  /** Routes mounted beside the facilitator's own (/metrics, the bazaar listing). */
  extraRoutes?: Array<{ method: string; path: string; handler: HttpHandler }>;
  /** The admission policy of open /settle and /verify, and payees it never pays (the stock desk). */
  admission?: { config: FacilitatorAdmissionConfig; ownPayees?: readonly string[] };
  /** How long a receiver's claim or sweep (`batch-settlement` at /settle) waits for its receipt before it is answered pending. */
  confirmMs: number;
}

/** The settlement engine behind the facilitator's HTTP routes. */
export async function runFacilitator(parts: FacilitatorParts): Promise<RunningFacilitator> {
  const { running, networks, http, log, metrics } = parts;
  const admission = parts.admission ?? { config: facilitatorAdmissionConfigFromEnv({}) };
  const extraRoutes = parts.extraRoutes ?? [];
  const health = async () => {
    const store = await parts.store.probe();
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
      // Receivers' claims, sweeps and refunds, each held to the price floor the engine holds payments to.
      channelOperations({
        chain: (caip2) => running.chain(caip2),
        records: parts.store.collection('facilitator-channel-operations'),
        claims: parts.store.claims('facilitator-channel-operations'),
        confirmMs: parts.confirmMs,
        log: log.child({ part: 'channel-operations' }),
        ...(running.engine.policy.floor ? { floor: running.engine.policy.floor } : {}),
        floorToken: (caip2) => networks.find(caip2)?.stablecoin.address,
      }),
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
