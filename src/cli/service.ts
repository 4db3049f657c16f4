import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../chain/canonical.ts';
import { DEVNET_ROLES, devnetAccount, devnetPrivateKey, isPublicTestKey } from '../devnet/accounts.ts';
import type { DevnetManifest } from '../devnet/manifest.ts';
import type { NetworkRegistry } from '../chain/networks.ts';
import { ConfigError, envString } from '../config/env.ts';
import { requireProductionSecrets } from '../config/production-secrets.ts';
import { type ClusterNode, clusterNodeConfigFromEnv } from '../cluster/join.ts';
import { createEngine, engineConfigFromEnv } from '../engine/create-engine.ts';
import { facilitatorAdmissionConfigFromEnv } from '../facilitator/admission.ts';
import { facilitatorHttpConfigFromEnv } from '../facilitator/config.ts';
import { discoveryResourcesHandler } from '../facilitator/discovery-resources.ts';
import { bazaarResources, type BazaarResource } from '../gateway/discovery/bazaar-resources.ts';
import { MerchantSnapshot } from '../gateway/discovery/merchant-snapshot.ts';
import { runFacilitator } from '../facilitator/run-facilitator.ts';
import { builtinCatalog } from '../devnet/catalog/catalog.ts';
import type { Merchant } from '../gateway/catalog/merchant.ts';
import { startFixtureUpstreams } from '../devnet/fixtures/server.ts';
import { merchantConfigFromEnv } from '../gateway/merchants/config.ts';
import { merchantHandlers } from '../gateway/merchants/http.ts';
import { MerchantRegistry } from '../gateway/merchants/registry.ts';
import { registrationBodyLimit } from '../gateway/merchants/validate.ts';
import { gatewayConfigFromEnv, runGateway } from '../gateway/run-gateway.ts';
import { urlPort } from '../gateway/upstream-guard/guard.ts';
import { ipRateLimited } from '../http/ip-rate-limited.ts';
import { TokenBucketLimiter } from '../http/rate-limit.ts';
import { createLogger } from '../log/logger.ts';
import { metricsEndpointConfigFromEnv, metricsExposure, metricsRoute, startMetricsListener } from '../metrics/endpoint.ts';
import { createMetrics } from '../metrics/metrics.ts';
import { refusal } from '../protocol/result.ts';
import type { VerifyRequest } from '../protocol/x402/types.ts';
import { remoteSettlementConfigFromEnv } from '../settlement/remote/facilitators-config.ts';
import { remoteSettlement } from '../settlement/remote/remote-settlement.ts';
import { createStockDesk, stockConfigFromEnv } from '../stock/create-stock-desk.ts';
import { webConfigFromEnv } from '../web/config.ts';
import { webRoutes } from '../web/routes.ts';
import { GasPriceCache, gasPriceReader } from '../chain/gas-price.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { PriceFloors, priceFloorConfigFromEnv, type PriceFloorConfig } from '../verify/price-floor.ts';

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

/** The channel merchant changes are told on, named by slug. */
const MERCHANT_CHANNEL = 'gate402_merchants';

/** DEVNET ONLY: the key that signs MPP receipts on the embedded default (derived from the public test mnemonic). */
const DEVNET_RECEIPT_KEY_INDEX = 60;
/** DEVNET ONLY: the secret header the built-in catalog sends to its local fixture upstreams. */
export const DEVNET_UPSTREAM_SECRET = 'devnet-fixture-key-not-a-secret';

/**
 * One settlement engine, shared by the facilitator and the gateway of this process: two engines over the same
 * relayer keys would race each other for nonces.
 */
export async function startService(opts: ServiceOptions, env: NodeJS.ProcessEnv = process.env): Promise<RunningService> {
  // Before anything starts: off the devnet, no key may come from the public test mnemonic.
  if (!opts.manifest) requireProductionSecrets(env, opts, opts.networks, isPublicTestKey);
  // Checked before anything opens too: off the devnet, what each network's native coin is worth (the price floor).
  const floorConfig = priceFloorConfigFromEnv(env, opts.networks.all(), { devnet: Boolean(opts.manifest) });
  // Checked before anything opens: the gateway's remote facilitators, per network (none: the engine settles all).
  const remoteConfig = opts.gateway
    ? remoteSettlementConfigFromEnv(
        env,
        opts.networks.all().map((n) => n.caip2),
      )
    : undefined;
  const log = createLogger('gate402');
  // One registry per process: in `start`, the facilitator's and the gateway's /metrics show the same numbers.
  const metrics = createMetrics();
  // Off the devnet /metrics is on the public listeners only behind a token, or on a listener of its own.
  const metricsConfig = metricsEndpointConfigFromEnv(env, { devnet: opts.manifest !== undefined });
  const publicMetrics = metricsConfig.public ? [metricsRoute(metrics, metricsConfig)] : [];
  // The live price floor: the engine refuses every payment below it (paid route and facilitator), the registry every route.
  const floors = priceFloorsFor(opts.networks, floorConfig, metrics, log.child({ part: 'price-floor' }));
  // The stock desk's key: the open facilitator never pays it, and in a cluster the gateway holding it takes its lease.
  const stockConfig = stockConfigFromEnv(env);
  const desk = stockConfig.deskKey ? privateKeyToAccount(stockConfig.deskKey).address : opts.manifest ? devnetAccount(DEVNET_ROLES.stockDesk).address : undefined;
  const cluster = clusterNodeConfigFromEnv(env);
  const engine = await createEngine(opts.networks, engineConfigFromEnv(env), log.child({ part: 'engine' }), metrics, {
    ...(opts.manifest ? { defaultRelayers: DEVNET_ROLES.relayers.map((i) => devnetAccount(i)) } : {}),
    floor: floors,
    ...(cluster
      ? {
          cluster: {
            config: cluster,
            ...(opts.gateway && stockConfig.enabled && desk ? { desk } : {}),
            // Signing on with a key another node may hold now would race it for nonces: stop at once.
            onLost: (why: string) => {
              log.error('stopping: this node lost its leases', { why });
              process.exit(1);
            },
          },
        }
      : {}),
  });
  const closers: Array<() => Promise<void>> = [() => engine.close()];
  const running: RunningService = {
    async close() {
      for (const close of closers.reverse()) await close();
    },
  };
  try {
    if (metricsConfig.listener) {
      const own = await startMetricsListener(metrics, { ...metricsConfig, listener: metricsConfig.listener }, (line) => log.error(line));
      closers.push(() => own.close());
    }
  } catch (err) {
    await running.close();
    throw err;
  }
  log.info(metricsExposure(metricsConfig));
  // The facilitator's bazaar listing: the gateway's paid resources when this process runs the gateway too (set
  // below, once its registry exists); a facilitator alone knows no resources and lists none.
  const noListing: readonly BazaarResource[] = Object.freeze([]);
  let listing: () => readonly BazaarResource[] | Promise<readonly BazaarResource[]> = () => noListing;
  try {
    if (opts.facilitator) {
      // The stock desk is paid through the gateway's stock API only: the open facilitator never pays it.
      const deskKey = stockConfigFromEnv(env).deskKey;
      const desk = deskKey ? privateKeyToAccount(deskKey).address : opts.manifest ? devnetAccount(DEVNET_ROLES.stockDesk).address : undefined;
      const discovery = { method: 'GET', path: '/discovery/resources', handler: discoveryResourcesHandler(() => listing()) };
      const f = await runFacilitator(engine, opts.networks, facilitatorHttpConfigFromEnv(env), log.child({ part: 'facilitator' }), metrics, [...publicMetrics, discovery], {
        config: facilitatorAdmissionConfigFromEnv(env),
        ...(desk ? { ownPayees: [desk] } : {}),
      });
      closers.push(() => f.close());
      running.facilitatorUrl = f.url;
    }
    if (opts.gateway) {
      const devnet = opts.manifest;
      const config = gatewayConfigFromEnv(env, devnet ? { receiptKey: devnetPrivateKey(DEVNET_RECEIPT_KEY_INDEX) as Hex } : {});
      // On the devnet the built-in catalog is served by local fixture upstreams (started here unless the catalog's
      // base is given). Exactly their origin is allowlisted, not the whole host: the chain RPCs, the facilitator and
      // this gateway listen on other ports of the same loopback address, and a self-registered merchant must not
      // reach them.
      let baseFor = (slug: string) => slug;
      if (devnet) {
        const fixtureBase = envString(env, 'GATE402_CATALOG_UPSTREAM_BASE', '');
        baseFor = (slug) => `${fixtureBase.replace(/\/$/, '')}/${slug}`;
        if (!fixtureBase) {
          const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
          closers.push(() => fixtures.close());
          baseFor = (slug) => fixtures.baseUrlFor(slug);
        }
        config.upstreamAllowlist = [...config.upstreamAllowlist, originEntry(baseFor('catalog'))];
      }
      // Payments on networks with remote facilitators are settled through them, with failover; the rest by the engine.
      const local = { settle: (request: VerifyRequest) => engine.engine.settle(request), verify: (request: VerifyRequest) => engine.engine.verify(request) };
      let settlement = local;
      if (remoteConfig) {
        const remote = remoteSettlement({
          config: remoteConfig,
          local,
          precheck: (request) => engine.engine.precheck(request),
          consumption: (request) => engine.engine.consumption(request),
          log: log.child({ part: 'remote-settlement' }),
          metrics,
        });
        closers.push(() => remote.close());
        settlement = remote;
        log.info('settling through remote facilitators', { networks: Object.fromEntries([...remoteConfig.networks].map(([n, list]) => [n, list.map((f) => f.name)])) });
      }
      const merchantConfig = merchantConfigFromEnv(env);
      const registry = new MerchantRegistry({
        store: engine.store,
        networks: opts.networks,
        filesDir: merchantConfig.filesDir,
        upstreamAllowlist: config.upstreamAllowlist,
        limits: merchantConfig.limits,
        uploadBudgets: merchantConfig.uploadBudgets,
        maxMerchantsPerWallet: merchantConfig.maxMerchantsPerWallet,
        size: merchantConfig.size,
        priceFloor: floors,
        log: log.child({ part: 'merchants' }),
        ...(engine.cluster ? { written: (slug: string) => (engine.cluster as ClusterNode).notify(MERCHANT_CHANNEL, slug) } : {}),
      });
      // Every node keeps merchants in memory: a change another node made drops it here, within a round trip.
      await engine.cluster?.listener.subscribe(MERCHANT_CHANNEL, { changed: (slug) => registry.forget(slug), resync: () => registry.forget() });
      const stock = await createStockDesk(
        {
          networks: opts.networks,
          store: engine.store,
          settle: settlement.settle,
          mppKey: config.mppKey,
          baseUrl: config.baseUrl,
          ...(devnet ? { defaultDeskAccount: devnetAccount(DEVNET_ROLES.stockDesk) } : {}),
          log: log.child({ part: 'stock' }),
          metrics,
        },
        stockConfig,
      );
      if (stock) closers.push(() => stock.close());
      const merchants: Merchant[] = [];
      if (devnet) {
        // The built-in catalog against local fixture upstreams, so everything works offline; chain-stocks from the
        // stock chain itself while the stock API runs.
        const payees = devnet.accounts.merchants.map((m) => m.address);
        const catalog = builtinCatalog({
          payTo: (slug) => payees[[...slug].reduce((h, c) => h + c.charCodeAt(0), 0) % payees.length] as `0x${string}`,
          networks: opts.networks.all().map((n) => n.caip2),
          upstreamFor: (slug) => ({ kind: 'url', baseUrl: baseFor(slug), secretHeaders: { 'x-api-key': DEVNET_UPSTREAM_SECRET } }),
          internal: new Set(stock ? (['stock-data'] as const) : []),
          owner: devnetAccount(DEVNET_ROLES.deployer).address,
          now: Date.now(),
        });
        merchants.push(...catalog);
      }
      const seeded = await registry.upsertBuiltin(merchants);
      // Files a crash left unreferenced (a merchant deleted or updated away from its file just before) are removed.
      await registry.sweepFiles();
      if (seeded.conflicts.length) log.warn('built-in merchants whose slug a registered merchant holds were left alone', { slugs: seeded.conflicts });
      // Read once per change (the registry tells each one, this node's or, through the cluster, another's).
      const snapshot = new MerchantSnapshot(registry, { onError: (error) => log.error('could not read the merchants', { error }) });
      closers.push(async () => snapshot.close());
      const handlers = merchantHandlers({ registry, snapshot });
      listing = () => snapshot.built('bazaar-resources', (view) => bazaarResources(view.merchants as Merchant[], config.baseUrl, opts.networks));
      // The pages offer a wallet the stock chain's RPC when it does not know the chain: on the devnet, its own.
      const web = webConfigFromEnv(env, devnet ? { walletRpcUrl: devnet.networks[CAIP2.stockChain]?.rpcUrl } : {});
      const g = await runGateway(
        {
          networks: opts.networks,
          engine: engine.engine,
          settlement,
          store: engine.store,
          ...(engine.cluster ? { live: engine.cluster.membership.live } : {}),
          merchants: { get: (slug) => registry.get(slug), list: () => registry.list() },
          snapshot,
          readFile: (sha256) => registry.readMerchantFile(sha256),
          internalUpstream: (name, request) => (stock ? stock.data(request) : refusal('upstream_off', `the ${name} upstream is off on this gateway`, 503)),
          extraRoutes: [
            ...publicMetrics,
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
            ...(web.enabled ? webRoutes({ networks: opts.networks, config: web, log: log.child({ part: 'web' }) }) : []),
          ],
          log: log.child({ part: 'gateway' }),
          metrics,
        },
        config,
      );
      closers.push(() => g.close());
      running.gatewayUrl = g.url;
      running.receiptSigner = g.receiptSigner;
    }
    return running;
  } catch (err) {
    await running.close();
    throw err;
  }
}

/** The upstream allowlist entry (`host:port`) of exactly the origin of `url`. */
function originEntry(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(`GATE402_CATALOG_UPSTREAM_BASE must be an absolute http(s) URL, got '${url}'`);
  }
  return `${parsed.hostname}:${urlPort(parsed)}`;
}

/** The price floors of `networks`: gas prices read live (cached, bounded), floors and refusals counted in metrics. */
function priceFloorsFor(networks: NetworkRegistry, config: PriceFloorConfig, metrics: Metrics, log: Logger): PriceFloors {
  const caip2s = networks.all().map((n) => n.caip2);
  metrics.declarePriceFloor(caip2s);
  const gasPrices = new GasPriceCache({
    read: gasPriceReader(networks, { timeoutMs: config.timeoutMs, observe: (caip2) => metrics.rpcObserver(caip2) }),
    maxAgeMs: config.maxAgeMs,
    timeoutMs: config.timeoutMs,
    failed: (network, error) => {
      metrics.gasPriceReadFailures.labels(network).inc();
      log.warn('could not read the gas price; the price floor keeps the last one read', { network, error: error instanceof Error ? error.message : String(error) });
    },
  });
  const floors = new PriceFloors({
    config,
    networks,
    gasPrices,
    observe: {
      floor: (network, atoms) => metrics.priceFloorAtoms.labels(network).set(Number(atoms)),
      refused: (network) => metrics.priceFloorRefusals.labels(network).inc(),
    },
  });
  // Each network's floor is read once at start, so it is in force (and on /metrics) before the first payment.
  for (const caip2 of caip2s) void floors.floorOn(caip2).catch(() => undefined);
  return floors;
}
