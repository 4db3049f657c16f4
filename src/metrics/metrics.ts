/**
 * Every Prometheus metric of a gate402 process, on one prom-client registry owned by one {@link Metrics} object that
 * the assembly (`cli/service.ts`) creates and hands to each part. Names start with `gate402_`; labels are
 * low-cardinality only: route templates (`/m/:slug/*`), never raw paths; merchant slugs, networks, relayer addresses
 * (a small fixed set), state names, reason codes.
 *
 * Hot paths stay cheap: per-request HTTP observations go to label children cached per (route, method, status), and
 * 402 challenges are plain numbers published when Prometheus scrapes. Gauges (pending payments, relayers, worker
 * pool, circuit breakers) are read from their owners at scrape time through the `watch*` methods, so nothing is
 * pushed on their account in between.
 */
import { collectDefaultMetrics, Registry } from 'prom-client';
import { type ChannelSeries, channelSeries } from './channel-series.ts';
import { type ChainSeries, chainSeries, type RelayerSample, type WorkerPoolSample } from './chain-series.ts';
import { type FacilitatorSeries, facilitatorSeries } from './facilitator-series.ts';
import { BREAKER_VALUE, type BreakerStateName, type MetricDefinition, metricKit, remember } from './metric-kit.ts';
import type { ResponseObserver, RpcObserver } from './observers.ts';
import { type PaymentSeries, paymentSeries } from './payment-series.ts';
import { SeriesHistogram, type Observe } from './series-histogram.ts';
import { type PriceFloorSeries, priceFloorSeries, type StockSeries, stockSeries } from './stock-series.ts';

export { statePath } from './machine-series.ts';
export { LOCAL_FACILITATOR } from './facilitator-series.ts';
export type { BreakerStateName, MetricDefinition } from './metric-kit.ts';
export type { MachineName } from './payment-series.ts';
export type { RelayerSample, WorkerPoolSample } from './chain-series.ts';
export type { ResponseObserver, RpcObserver } from './observers.ts';

export const METRIC_PREFIX = 'gate402_';

export type ChallengeProtocol = 'x402' | 'mpp';
export type HttpServerName = 'gateway' | 'facilitator';
export type StoreKind = 'lmdb' | 'postgres';

/** Every series of the process; the payment engine's are {@link PaymentSeries}'s, documented there. */
export interface Metrics extends PaymentSeries, ChannelSeries {
  readonly registry: Registry;
  /** Every metric defined here (the default process metrics are on the registry too, without labels listed). */
  readonly definitions: readonly MetricDefinition[];
  /** The text exposition format of the registry, as `GET /metrics` serves it. */
  scrape(): Promise<{ contentType: string; body: string }>;

  /** The per-response observer for one HTTP server; methods other than the standard ones count as `OTHER`. */
  httpObserver(server: HttpServerName): ResponseObserver;
  /** A 402 carried a challenge of this protocol. */
  challengeIssued(protocol: ChallengeProtocol): void;
  /** The observer for the RPC transport of one chain (`eip155:...`). */
  rpcObserver(chain: string): RpcObserver;
  /** What a reorg did to a mined transaction (moved, resent, reverted_after_reorg, lost). */
  reorgedTransaction(network: string, outcome: string): void;
  /** One durable write of the store: from the write until it was durable (LMDB: committed and flushed; PostgreSQL: committed). */
  storeCommit(store: StoreKind, seconds: number): void;
  /** One upstream call of a merchant: its HTTP status, or `error` when no answer came. */
  upstreamCall(merchant: string, status: number | 'error', seconds: number): void;
  /** A paid request was settled: the route's price, in USD. */
  revenue(merchant: string, protocol: ChallengeProtocol, usd: number): void;

  /** A durable write of the store failed (a full disk, an I/O error, a lost database connection). */
  storeError(store: StoreKind): void;
  /** A record write was refused as backward: the stored record's state is later (see `src/store/record-order.ts`). */
  storeBackwardWrite(store: StoreKind, collection: string): void;

  /**
   * Series that exist before their first event, at zero (Prometheus's instrumentation practice: a panel shows 0,
   * not "No data", and an alert on `rate()` or `increase()` sees the first event). Each declares what is known when
   * the part starts; the vocabularies (reasons, kinds, outcomes) come from the parts that own them.
   */
  /** The store this process writes to, and the relayers' minimum gas balance (below it they take no new work). */
  declareStore(store: StoreKind, rankedCollections?: readonly string[]): void;
  declareRelayerMinBalance(wei: bigint): void;
  /** The reorg outcomes on each network (see {@link ChainSeries.reorgedTransaction}). */
  declareReorgOutcomes(networks: readonly string[], outcomes: readonly string[]): void;
  /** The stock desk's symbols, order outcomes, refund reasons and sponsorship outcomes. */
  declareStock(known: { symbols: readonly string[]; outcomes: readonly string[]; refundReasons: readonly string[]; sponsorshipOutcomes: readonly string[] }): void;

  /** Scrape-time sources. Each may be called more than once (e.g. one per chain); all sources are read. */
  watchRelayers(read: () => Iterable<RelayerSample>): void;
  watchWorkerPool(pool: string, read: () => WorkerPoolSample): void;
  watchBreakers(read: () => Promise<Iterable<[merchant: string, state: BreakerStateName]>>): void;
  /** The merchants served: each one's revenue and upstream calls exist at zero from the first scrape that lists it. */
  watchMerchants(read: () => Promise<Iterable<string>>): void;

  /**
   * The remote facilitators a gateway settles through (`GATE402_FACILITATORS`): their error and failover series start
   * at zero, and `state` is read for their breaker at scrape time.
   */
  watchFacilitators(facilitators: Iterable<{ facilitator: string; network: string }>, state: (facilitator: string) => BreakerStateName): void;
  /** A call to a remote facilitator brought no usable answer (`kind`: unreachable, timeout, connection_lost, http_5xx, ...). */
  facilitatorError(facilitator: string, network: string, kind: string): void;
  /** A payment proven not settled by `from` (or passed over while its breaker is open) went on to the next facilitator. */
  facilitatorFailover(facilitator: string, network: string): void;

  /** Stock orders (issue 5), incremented by the stock desk. */
  readonly stockOrders: StockSeries['stockOrders'];
  readonly stockOrderVolumeUsd: StockSeries['stockOrderVolumeUsd'];
  readonly stockRefunds: StockSeries['stockRefunds'];
  readonly stockSponsorships: StockSeries['stockSponsorships'];

  /** The price floor (issue 21): each network's floor, payments refused below it, gas price reads that failed. */
  declarePriceFloor(networks: readonly string[]): void;
  readonly priceFloorAtoms: PriceFloorSeries['priceFloorAtoms'];
  readonly priceFloorRefusals: PriceFloorSeries['priceFloorRefusals'];
  readonly gasPriceReadFailures: PriceFloorSeries['gasPriceReadFailures'];
  /** Gas sponsorship's hourly budget (issue 21): native coin sent, and what is left of the last hour's budget. */
  readonly stockSponsoredNative: StockSeries['stockSponsoredNative'];
  readonly stockSponsorBudgetLeft: StockSeries['stockSponsorBudgetLeft'];
}

const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']);
const PROTOCOLS: readonly ChallengeProtocol[] = ['x402', 'mpp'];

/** `clock` is in milliseconds (default `performance.now`); `defaultMetrics: false` leaves out the process metrics. */
export function createMetrics(opts: { clock?: () => number; defaultMetrics?: boolean } = {}): Metrics {
  const clock = opts.clock ?? (() => performance.now());
  const registry = new Registry();
  const kit = metricKit(registry);

  const httpDuration = (() => {
    const config = kit.define('histogram', {
      name: 'gate402_http_request_duration_seconds',
      help: 'HTTP responses by server, route template (`unmatched` when no route matched), method and status, from request to response written; `_count` is the request count',
      labelNames: ['server', 'route', 'method', 'status'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    });
    // Observed once per HTTP response: the series histogram's cheap path (same exposition as prom-client's).
    return new SeriesHistogram(config.name, config.help, config.labelNames, config.buckets, [registry]);
  })();

  const issued: Record<ChallengeProtocol, number> = { x402: 0, mpp: 0 };
  kit.counter({
    name: 'gate402_challenges_total',
    help: 'Payment challenges issued in 402 answers, by protocol (one 402 usually carries both)',
    labelNames: ['protocol'],
    collect() {
      this.reset();
      for (const p of PROTOCOLS) this.labels(p).inc(issued[p]);
    },
  });

  const payments: PaymentSeries = paymentSeries(kit, clock);
  const chains: ChainSeries = chainSeries(kit);

  const storeCommit = kit.histogram({
    name: 'gate402_store_commit_duration_seconds',
    help: 'Durable writes by store (lmdb, postgres), from the write until it is durable (LMDB: committed and flushed to disk; PostgreSQL: the commit answered)',
    labelNames: ['store'],
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  });
  const storeErrors = kit.counter({ name: 'gate402_store_errors_total', help: 'Durable writes that failed, by store (lmdb, postgres)', labelNames: ['store'] });
  const storeBackward = kit.counter({
    name: 'gate402_store_backward_writes_total',
    help: 'Record writes refused because the stored record is at a later state (a late or stale write), by store and collection',
    labelNames: ['store', 'collection'],
  });

  const upstream = kit.histogram({
    name: 'gate402_upstream_request_duration_seconds',
    help: 'Calls to merchant upstreams by merchant and outcome (2xx, 3xx, 4xx, 5xx, error); `_count` is the call count',
    labelNames: ['merchant', 'outcome'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  });
  const breakerSources: Array<() => Promise<Iterable<[string, BreakerStateName]>>> = [];
  kit.gauge({
    name: 'gate402_upstream_circuit_state',
    help: 'Circuit breaker of each merchant upstream: 0 closed, 1 half-open, 2 open',
    labelNames: ['merchant'],
    async collect() {
      const states = await Promise.all(breakerSources.map((read) => read()));
      this.reset();
      for (const source of states) for (const [merchant, state] of source) this.labels(merchant).set(BREAKER_VALUE[state]);
    },
  });
  const revenue = kit.counter({ name: 'gate402_revenue_usd_total', help: 'Price of the paid requests served, in USD, by merchant and protocol', labelNames: ['merchant', 'protocol'] });

  const facilitators: FacilitatorSeries = facilitatorSeries(kit);
  const stock: StockSeries = stockSeries(kit);
  const floors: PriceFloorSeries = priceFloorSeries(kit);
  const channels: ChannelSeries = channelSeries(kit);

  if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });

  // Merchants are read when Prometheus scrapes, before the exposition is written; each is initialised once.
  const merchantSources: Array<() => Promise<Iterable<string>>> = [];
  const merchantsSeen = new Set<string>();
  const declareMerchants = async () => {
    for (const read of merchantSources) {
      for (const merchant of await read()) {
        if (merchantsSeen.has(merchant)) continue;
        merchantsSeen.add(merchant);
        for (const p of PROTOCOLS) revenue.labels(merchant, p).inc(0);
        // One outcome only: a histogram child is 15 series, and merchants are registered by anyone. The served
        // outcome is what the latency panels read; error outcomes appear with the first error.
        upstream.zero({ merchant, outcome: '2xx' });
      }
    }
  };

  return {
    registry,
    definitions: kit.definitions,
    async scrape() {
      await declareMerchants();
      return { contentType: registry.contentType, body: await registry.metrics() };
    },

    httpObserver(server) {
      const children = new Map<string, Map<string, Map<number, Observe>>>();
      return (route, method, status, seconds) => {
        const m = HTTP_METHODS.has(method) ? method : 'OTHER';
        const byMethod = children.get(route) ?? remember(children, route, new Map<string, Map<number, Observe>>());
        const byStatus = byMethod.get(m) ?? remember(byMethod, m, new Map<number, Observe>());
        const observe = byStatus.get(status) ?? remember(byStatus, status, httpDuration.series(server, route, m, String(status)));
        observe(seconds);
      };
    },
    challengeIssued(protocol) {
      issued[protocol]++;
    },

    ...payments,
    declareSettlements(networks, outcomes) {
      payments.declareSettlements(networks, outcomes);
      facilitators.engineSettles(networks);
    },
    ...chains,

    storeCommit(store, seconds) {
      storeCommit.labels(store).observe(seconds);
    },
    storeError(store) {
      storeErrors.labels(store).inc();
    },
    storeBackwardWrite(store, collection) {
      storeBackward.labels(store, collection).inc();
    },
    declareStore(store, rankedCollections = []) {
      storeErrors.labels(store).inc(0);
      for (const collection of rankedCollections) storeBackward.labels(store, collection).inc(0);
      storeCommit.zero({ store });
    },

    upstreamCall(merchant, status, seconds) {
      upstream.labels(merchant, status === 'error' ? 'error' : `${Math.floor(status / 100)}xx`).observe(seconds);
    },
    revenue(merchant, protocol, usd) {
      revenue.labels(merchant, protocol).inc(usd);
    },
    watchBreakers(read) {
      breakerSources.push(read);
    },
    watchMerchants(read) {
      merchantSources.push(read);
    },

    watchFacilitators: facilitators.watchFacilitators,
    facilitatorError: facilitators.facilitatorError,
    facilitatorFailover: facilitators.facilitatorFailover,

    ...stock,
    ...floors,
    ...channels,
  };
}
