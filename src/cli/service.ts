/**
 * The composition root: one process's parts, built in order and handed what they need. It opens the store and joins
 * the cluster, builds the engine on them, and lends the store, the cluster and the settlement port to the
 * facilitator, the gateway and the stock desk (`compose-*.ts`, one part each). On the devnet the demo keys, fixture
 * upstreams and built-in catalog come from `devnet/service-devnet.ts`; off it, none of that exists.
 *
 * One settlement engine is shared by the facilitator and the gateway of this process: two engines over the same
 * relayer keys would race each other for nonces.
 */
import { privateKeyToAccount } from 'viem/accounts';
import type { NetworkRegistry } from '../chain/networks.ts';
import { clusterNodeConfigFromEnv } from '../cluster/join.ts';
import { requireProductionSecrets } from '../config/production-secrets.ts';
import { channelConfigFromEnv } from '../gateway/paywall/channel-settings.ts';
import { isPublicTestKey } from '../devnet/accounts.ts';
import type { DevnetManifest } from '../devnet/manifest.ts';
import { serviceDevnet } from '../devnet/service-devnet.ts';
import { engineConfigFromEnv, relayerAccountsFor } from '../engine/create-engine.ts';
import type { BazaarResource } from '../gateway/discovery/bazaar-resources.ts';
import { createLogger } from '../log/logger.ts';
import { metricsEndpointConfigFromEnv, metricsExposure, metricsRoute, startMetricsListener } from '../metrics/endpoint.ts';
import { createMetrics } from '../metrics/metrics.ts';
import { remoteSettlementConfigFromEnv } from '../settlement/remote/facilitators-config.ts';
import { stockConfigFromEnv } from '../stock/create-stock-desk.ts';
import { priceFloorConfigFromEnv } from '../policy/price-floor.ts';
import { composeEngine } from './compose-engine.ts';
import { composeFacilitator } from './compose-facilitator.ts';
import { composeGateway } from './compose-gateway.ts';
import { composePriceFloors } from './compose-price-floor.ts';
import { composeSettlement } from './compose-settlement.ts';

export { DEVNET_UPSTREAM_SECRET } from '../devnet/service-devnet.ts';

export interface ServiceOptions {
  networks: NetworkRegistry;
  /** Present on the devnet: demo keys, local fixture upstreams and the built-in catalog come from it. */
  manifest?: DevnetManifest;
  facilitator: boolean;
  gateway: boolean;
}

export interface RunningService {
  facilitatorUrl?: string;
  gatewayUrl?: string;
  receiptSigner?: string;
  close(): Promise<void>;
}

export async function startService(opts: ServiceOptions, env: NodeJS.ProcessEnv = process.env): Promise<RunningService> {
  const { networks } = opts;
  const devnet = opts.manifest ? serviceDevnet(opts.manifest) : undefined;
  // Checked before anything opens: off the devnet no key may come from the public test mnemonic, every native coin's
  // price must be known (the price floor), the remote facilitators must parse, and relayer keys must be given.
  if (!devnet) requireProductionSecrets(env, opts, networks, isPublicTestKey);
  const floorConfig = priceFloorConfigFromEnv(env, networks.all(), { devnet: devnet !== undefined });
  const remote = opts.gateway
    ? remoteSettlementConfigFromEnv(
        env,
        networks.all().map((n) => n.caip2),
      )
    : undefined;
  // Payment channels' margins too: off the devnet, a setting that could not protect an accepted voucher stops the start here.
  if (opts.gateway) channelConfigFromEnv(env, devnet?.channelAuthorizerKey);
  const engineConfig = engineConfigFromEnv(env);
  const relayers = relayerAccountsFor(engineConfig, devnet?.relayers);
  const stockConfig = stockConfigFromEnv(env);
  // The stock desk's key: the open facilitator never pays it.
  const desk = stockConfig.deskKey ? privateKeyToAccount(stockConfig.deskKey).address : devnet?.deskAccount.address;

  const log = createLogger('gate402');
  // One registry per process: in `start`, the facilitator's and the gateway's /metrics show the same numbers.
  const metrics = createMetrics();
  // Off the devnet /metrics is on the public listeners only behind a token, or on a listener of its own.
  const metricsConfig = metricsEndpointConfigFromEnv(env, { devnet: devnet !== undefined });
  const publicMetrics = metricsConfig.public ? [metricsRoute(metrics, metricsConfig)] : [];

  const closers: Array<() => Promise<void>> = [];
  const closeLater = (close: () => Promise<void>) => void closers.push(close);
  const running: RunningService = {
    async close() {
      for (const close of closers.splice(0).reverse()) await close();
    },
  };
  try {
    // The live price floor: the engine refuses every payment below it (paid route and facilitator), the registry every route.
    const floors = composePriceFloors(networks, floorConfig, metrics, log.child({ part: 'price-floor' }));
    const { store, cluster, engine } = await composeEngine({
      networks,
      config: engineConfig,
      relayers,
      cluster: clusterNodeConfigFromEnv(env),
      // No desk lease at the join: every gateway node has the desk, and the one holding its lease runs it (stock/desk-lease.ts).
      desk: undefined,
      floors,
      log,
      metrics,
      closeLater,
    });
    if (metricsConfig.listener) {
      const own = await startMetricsListener(metrics, { ...metricsConfig, listener: metricsConfig.listener }, (line) => log.error(line));
      closeLater(() => own.close());
    }
    log.info(metricsExposure(metricsConfig));
    // The facilitator's bazaar listing: the gateway's paid resources when this process runs the gateway too (set
    // below, once its registry exists); a facilitator alone knows no resources and lists none.
    const noListing: readonly BazaarResource[] = Object.freeze([]);
    let listing: () => readonly BazaarResource[] | Promise<readonly BazaarResource[]> = () => noListing;
    if (opts.facilitator) {
      const f = await composeFacilitator({ env, networks, engine, store, listing: () => listing(), desk, publicMetrics, log, metrics, confirmMs: engineConfig.confirmDeadlineMs });
      closeLater(() => f.close());
      running.facilitatorUrl = f.url;
    }
    if (opts.gateway) {
      const settled = composeSettlement({ engine, remote, log, metrics });
      closeLater(() => settled.close());
      const g = await composeGateway({ env, networks, devnet, store, cluster, ...settled, chain: (caip2) => engine.chain(caip2), floors, stockConfig, publicMetrics, log, metrics, closeLater });
      listing = g.listing;
      running.gatewayUrl = g.gateway.url;
      running.receiptSigner = g.gateway.receiptSigner;
    }
    return running;
  } catch (err) {
    await running.close();
    throw err;
  }
}
