/**
 * The composition root's gateway: the merchant registry (seeded with the devnet's built-in catalog on the devnet),
 * the stock desk, the pages, and the paid reverse proxy, all on the store and the settlement port they are lent.
 */
import type { NetworkRegistry } from '../chain/networks.ts';
import { clusterNodeConfigFromEnv, type ClusterNode } from '../cluster/join.ts';
import type { DevnetUpstreams, ServiceDevnet } from '../devnet/service-devnet.ts';
import type { Merchant } from '../gateway/catalog/merchant.ts';
import { bazaarResources, type BazaarResource } from '../gateway/discovery/bazaar-resources.ts';
import { MerchantSnapshot } from '../gateway/discovery/merchant-snapshot.ts';
import { merchantConfigFromEnv } from '../gateway/merchants/config.ts';
import { merchantHandlers } from '../gateway/merchants/http.ts';
import type { MerchantRegistry } from '../gateway/merchants/registry.ts';
import { registrationBodyLimit } from '../gateway/merchants/validate.ts';
import { gatewayConfigFromEnv, type RunningGateway, runGateway } from '../gateway/run-gateway.ts';
import { channelOfferTerms } from '../gateway/paywall/channel-composition.ts';
import { ipRateLimited } from '../http/ip-rate-limited.ts';
import { TokenBucketLimiter } from '../http/rate-limit.ts';
import type { HttpHandler } from '../http/server.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { Settlement } from '../ports/settlement.ts';
import type { SendingChain } from '../tx/sending-chain.ts';
import { refusal } from '../protocol/result.ts';
import { createStockDesk, type RunningStockDesk, type StockConfig } from '../stock/create-stock-desk.ts';
import type { Store } from '../store/open-store.ts';
import type { PriceFloors } from '../policy/price-floor.ts';
import { webConfigFromEnv } from '../web/config.ts';
import { webRoutes } from '../web/routes.ts';
import { composeDeskCluster } from './compose-desk-cluster.ts';
import { roleLeases } from './compose-role-leases.ts';
import { composeMerchants } from './compose-merchants.ts';

export interface GatewayComposition {
  env: NodeJS.ProcessEnv;
  networks: NetworkRegistry;
  /** Present on the devnet: its receipt key, desk, fixture upstreams and built-in catalog. */
  devnet: ServiceDevnet | undefined;
  store: Store;
  cluster: ClusterNode | undefined;
  settlement: Settlement;
  /** The local engine's chain parts: the payment channels' claims are sent with its relayers. */
  chain?: (caip2: string) => SendingChain | undefined;
  /** Payments being settled now (the /health count). */
  load(): number;
  floors: PriceFloors;
  stockConfig: StockConfig;
  publicMetrics: Array<{ method: string; path: string; handler: HttpHandler }>;
  log: Logger;
  metrics: Metrics;
  /** Told each thing started here that must be closed (in reverse order) when the process stops. */
  closeLater(close: () => Promise<void>): void;
}

export interface ComposedGateway {
  gateway: RunningGateway;
  /** The gateway's paid resources, as the facilitator's bazaar lists them. */
  listing(): readonly BazaarResource[] | Promise<readonly BazaarResource[]>;
}

export async function composeGateway(c: GatewayComposition): Promise<ComposedGateway> {
  const { env, networks, devnet, log, metrics } = c;
  const config = gatewayConfigFromEnv(env, devnet ? { receiptKey: devnet.receiptKey, channelAuthorizerKey: devnet.channelAuthorizerKey } : {});
  let upstreams: DevnetUpstreams | undefined;
  if (devnet) {
    upstreams = await devnet.upstreams(env);
    c.closeLater(upstreams.close);
    config.upstreamAllowlist = [...config.upstreamAllowlist, upstreams.allowlistEntry];
  }
  const merchantConfig = merchantConfigFromEnv(env);
  const registry = await composeMerchants({ config: merchantConfig, store: c.store, cluster: c.cluster, networks, upstreamAllowlist: config.upstreamAllowlist, floors: c.floors, log });
  const stock = await createStockDesk(
    {
      networks,
      store: c.store,
      settlement: c.settlement,
      mppKey: config.mppKey,
      baseUrl: config.baseUrl,
      ...(devnet ? { defaultDeskAccount: devnet.deskAccount } : {}),
      log: log.child({ part: 'stock' }),
      metrics,
      ...(c.cluster ? { cluster: composeDeskCluster(env, c.cluster, log.child({ part: 'stock' })) } : {}),
    },
    c.stockConfig,
  );
  if (stock) c.closeLater(() => stock.close());
  const builtin =
    devnet && upstreams
      ? devnet.catalog(
          networks.all().map((n) => n.caip2),
          upstreams,
          new Set(stock ? (['stock-data'] as const) : []),
        )
      : [];
  const snapshot = await seedMerchants(registry, builtin, log);
  c.closeLater(async () => snapshot.close());
  const channelOffers = channelOfferTerms(config.channels);
  const handlers = merchantHandlers({ registry, snapshot });
  // The pages offer a wallet the stock chain's RPC when it does not know the chain: on the devnet, its own.
  const clusterConfig = c.cluster ? clusterNodeConfigFromEnv(env) : undefined;
  const web = webConfigFromEnv(env, devnet ? { walletRpcUrl: devnet.walletRpcUrl } : {});
  const gateway = await runGateway(
    {
      networks,
      settlement: c.settlement,
      ...(c.chain ? { chain: c.chain } : {}),
      ...(clusterConfig ? { claimCluster: roleLeases(clusterConfig, 'channel claimer', log.child({ part: 'channel-claims' })) } : {}),
      load: c.load,
      store: c.store,
      ...(c.cluster ? { live: c.cluster.membership.live } : {}),
      merchants: { get: (slug) => registry.get(slug), list: () => registry.list() },
      snapshot,
      readFile: (sha256) => registry.readMerchantFile(sha256),
      internalUpstream: devnetFixturesOr(upstreams, stock, internalUpstreamOf(stock)),
      extraRoutes: [
        ...c.publicMetrics,
        {
          method: 'POST',
          path: '/api/merchants',
          handler: ipRateLimited(handlers.register, new TokenBucketLimiter({ capacity: 20, refillPerSecond: 0.5 }), 'registrations'),
          // Registration alone takes uploads; every other route keeps the gateway's small body limit.
          options: { maxBodyBytes: registrationBodyLimit(merchantConfig.limits.maxFileBytes) },
        },
        { method: 'GET', path: '/api/merchants', handler: handlers.list },
        { method: 'GET', path: '/api/merchants/:slug', handler: handlers.get },
        ...(stock?.routes ?? []),
        ...(web.enabled ? webRoutes({ networks, config: web, log: log.child({ part: 'web' }) }) : []),
      ],
      log: log.child({ part: 'gateway' }),
      metrics,
    },
    config,
  );
  c.closeLater(() => gateway.close());
  return { gateway, listing: () => snapshot.built('bazaar-resources', (view) => bazaarResources(view.merchants as Merchant[], config.baseUrl, networks, channelOffers)) };
}

/** Seeds the built-in merchants, sweeps files a crash left unreferenced, and reads the merchants once per change. */
async function seedMerchants(registry: MerchantRegistry, builtin: Merchant[], log: Logger): Promise<MerchantSnapshot> {
  const seeded = await registry.upsertBuiltin(builtin);
  // Files a crash left unreferenced (a merchant deleted or updated away from its file just before) are removed.
  await registry.sweepFiles();
  if (seeded.conflicts.length) log.warn('built-in merchants whose slug a registered merchant holds were left alone', { slugs: seeded.conflicts });
  // Read once per change (the registry tells each one, this node's or, through the cluster, another's).
  return new MerchantSnapshot(registry, { onError: (error) => log.error('could not read the merchants', { error }) });
}

/**
 * The devnet's `fixtures/{slug}` upstreams, answered by this node's own fixture server, and the stock data on a node
 * whose stock API is off from its `chain-stocks` fixture (the record is the same on every node); the rest to `next`.
 */
function devnetFixturesOr(upstreams: DevnetUpstreams | undefined, stock: RunningStockDesk | undefined, next: ReturnType<typeof internalUpstreamOf>) {
  return (name: string, request: Parameters<RunningStockDesk['data']>[0]) => {
    if (upstreams && name.startsWith('fixtures/')) return upstreams.call(name.slice('fixtures/'.length), request);
    if (upstreams && name === 'stock-data' && !stock) return upstreams.call('chain-stocks', request);
    return next(name, request);
  };
}

/** The upstreams served inside the gateway: the stock desk's data while it runs. */
function internalUpstreamOf(stock: RunningStockDesk | undefined) {
  return (name: string, request: Parameters<RunningStockDesk['data']>[0]) => (stock ? stock.data(request) : refusal('upstream_off', `the ${name} upstream is off on this gateway`, 503));
}
