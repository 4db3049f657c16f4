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
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AnyActorRef, AnyStateMachine, StateValue } from 'xstate';
import type { RpcObserver } from '../chain/clients.ts';
import type { ResponseObserver } from '../http/server.ts';
import { SHED_REASONS } from '../ports/settlement.ts';
import { REFUSAL_KINDS } from '../engine/revert-budget.ts';
import { Eip3009Reason, GatewayReason, Permit2Reason } from '../verify/reasons.ts';
import { machineSeries } from './machine-series.ts';
import { SeriesHistogram, type Observe } from './series-histogram.ts';

export const METRIC_PREFIX = 'gate402_';

/** The statecharts whose actors are measured: `payment` (settlement engine) and `order` (stock orders). */
export type MachineName = 'payment' | 'order';
export type ChallengeProtocol = 'x402' | 'mpp';
export type HttpServerName = 'gateway' | 'facilitator';
export type BreakerStateName = 'closed' | 'half-open' | 'open';
export type StoreKind = 'lmdb' | 'postgres';

export interface RelayerSample {
  network: string;
  address: string;
  balanceWei: bigint;
  inFlight: number;
}

export interface WorkerPoolSample {
  /** Jobs waiting for a worker. */
  queued: number;
  /** Workers busy now. */
  busy: number;
  threads: number;
}

/** A metric as defined here: what the dashboards test checks panel queries against. */
export interface MetricDefinition {
  name: string;
  type: 'counter' | 'gauge' | 'histogram';
  labelNames: readonly string[];
}

export interface Metrics {
  readonly registry: Registry;
  /** Every metric defined here (the default process metrics are on the registry too, without labels listed). */
  readonly definitions: readonly MetricDefinition[];
  /** The text exposition format of the registry, as `GET /metrics` serves it. */
  scrape(): Promise<{ contentType: string; body: string }>;

  /** The per-response observer for one HTTP server; methods other than the standard ones count as `OTHER`. */
  httpObserver(server: HttpServerName): ResponseObserver;
  /** A 402 carried a challenge of this protocol. */
  challengeIssued(protocol: ChallengeProtocol): void;
  /** A payment was judged: `reason` is the invalid reason code, or `none` when valid. */
  verification(valid: boolean, reason: string): void;
  /** Counts the actor's transitions and times each state it leaves. Call before `actor.start()`. */
  watchActor(machine: MachineName, actor: AnyActorRef): void;
  /** A payment actor finished in `outcome` (its final state), `seconds` after the payment was first seen. */
  settlement(network: string, outcome: string, seconds: number): void;
  /** A new payment turned away (503, nothing charged) because its network's settlement is behind. */
  paymentShed(network: string, reason: string): void;
  /** A settlement (or a batch member's call) that passed simulation reverted on chain, burning `gas` of our relayers'. */
  revertedSettlement(network: string, gas: bigint): void;
  /** A contract payer refused by the revert budget (`kind`: payer_banned, code_banned, payer_gas, code_gas, total_gas, code_busy). */
  revertRefusal(kind: string): void;
  /** The observer for the RPC transport of one chain (`eip155:...`). */
  rpcObserver(chain: string): RpcObserver;
  /** One durable LMDB write: from the write until it was committed and flushed to disk. */
  lmdbCommit(seconds: number): void;
  /** One upstream call of a merchant: its HTTP status, or `error` when no answer came. */
  upstreamCall(merchant: string, status: number | 'error', seconds: number): void;
  /** A paid request was settled: the route's price, in USD. */
  revenue(merchant: string, protocol: ChallengeProtocol, usd: number): void;

  /** A durable write of the store failed (a full disk, an I/O error, a lost database connection). */
  storeError(store: StoreKind): void;

  /**
   * Series that exist before their first event, at zero (Prometheus's instrumentation practice: a panel shows 0,
   * not "No data", and an alert on `rate()` or `increase()` sees the first event). Each declares what is known when
   * the part starts.
   */
  /** The machine's transitions and the states it rests in, as {@link watchActor} counts and times them. */
  declareMachine(machine: MachineName, definition: AnyStateMachine): void;
  /** Settlements on each network ending in each outcome (the payment machine's final states). */
  declareSettlements(networks: readonly string[], outcomes: readonly string[]): void;
  /** The store this process writes to, and the relayers' minimum gas balance (below it they take no new work). */
  declareStore(store: StoreKind): void;
  declareRelayerMinBalance(wei: bigint): void;
  /** The stock desk's symbols, order outcomes, refund reasons and sponsorship outcomes. */
  declareStock(known: { symbols: readonly string[]; outcomes: readonly string[]; refundReasons: readonly string[]; sponsorshipOutcomes: readonly string[] }): void;

  /** Scrape-time sources. Each may be called more than once (e.g. one per chain); all sources are read. */
  watchPendingPayments(read: () => number): void;
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
  readonly stockOrders: Counter<'symbol' | 'outcome'>;
  readonly stockOrderVolumeUsd: Counter<'symbol'>;
  readonly stockRefunds: Counter<'reason'>;
  readonly stockSponsorships: Counter<'outcome'>;

  /** The price floor (issue 21): each network's floor, payments refused below it, gas price reads that failed. */
  declarePriceFloor(networks: readonly string[]): void;
  readonly priceFloorAtoms: Gauge<'network'>;
  readonly priceFloorRefusals: Counter<'network'>;
  readonly gasPriceReadFailures: Counter<'network'>;
  /** Gas sponsorship's hourly budget (issue 21): native coin sent, and what is left of the last hour's budget. */
  readonly stockSponsoredNative: Counter<never>;
  readonly stockSponsorBudgetLeft: Gauge<never>;
}

const HTTP_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']);
const BREAKER_VALUE: Record<BreakerStateName, number> = { closed: 0, 'half-open': 1, open: 2 };
/**
 * The `facilitator` of a network no remote facilitator settles: the process's own engine (a space cannot be in a
 * remote one's name, which is a URL's host and path). Its series exist at zero and stay there (no remote call to
 * fail, nothing to fail over to, no breaker to open), so the facilitator panels show who settles, not "No data".
 */
export const LOCAL_FACILITATOR = 'local engine';
/** The error kinds a facilitator's series start with (the others appear with their first event). */
const FACILITATOR_ERROR_KINDS = ['unreachable', 'timeout', 'connection_lost', 'http_5xx'] as const;
const WEI_PER_ETHER = 10n ** 18n;
const PROTOCOLS: readonly ChallengeProtocol[] = ['x402', 'mpp'];
const INVALID_REASONS = [...new Set([...Object.values(Eip3009Reason), ...Object.values(Permit2Reason), ...Object.values(GatewayReason)])];

const ether = (wei: bigint): number => {
  const whole = wei / WEI_PER_ETHER;
  return Number(whole) + Number(wei - whole * WEI_PER_ETHER) / 1e18;
};

/** `inFlight.confirming` for `{inFlight: 'confirming'}`; parallel regions joined with `,`. */
export function statePath(value: StateValue): string {
  if (typeof value === 'string') return value;
  return Object.entries(value)
    .map(([k, v]) => (v === undefined || (typeof v === 'object' && Object.keys(v).length === 0) ? k : `${k}.${statePath(v)}`))
    .join(',');
}

/** `clock` is in milliseconds (default `performance.now`); `defaultMetrics: false` leaves out the process metrics. */
export function createMetrics(opts: { clock?: () => number; defaultMetrics?: boolean } = {}): Metrics {
  const clock = opts.clock ?? (() => performance.now());
  const registry = new Registry();
  const definitions: MetricDefinition[] = [];
  const registers = [registry];
  const define = <T extends { name: string; labelNames?: readonly string[] }>(type: MetricDefinition['type'], config: T): T => {
    definitions.push({ name: config.name, type, labelNames: config.labelNames ?? [] });
    return config;
  };
  const counter = <L extends string>(config: { name: string; help: string; labelNames: readonly L[]; collect?: (this: Counter<L>) => void }) =>
    new Counter<L>({ ...define('counter', config), registers });
  const gauge = <L extends string>(config: { name: string; help: string; labelNames: readonly L[]; collect?: (this: Gauge<L>) => void }) => new Gauge<L>({ ...define('gauge', config), registers });
  const histogram = <L extends string>(config: { name: string; help: string; labelNames: readonly L[]; buckets: number[] }) => new Histogram<L>({ ...define('histogram', config), registers });

  const httpDuration = (() => {
    const config = define('histogram', {
      name: 'gate402_http_request_duration_seconds',
      help: 'HTTP responses by server, route template (`unmatched` when no route matched), method and status, from request to response written; `_count` is the request count',
      labelNames: ['server', 'route', 'method', 'status'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    });
    // Observed once per HTTP response: the series histogram's cheap path (same exposition as prom-client's).
    return new SeriesHistogram(config.name, config.help, config.labelNames, config.buckets, registers);
  })();

  const issued: Record<ChallengeProtocol, number> = { x402: 0, mpp: 0 };
  counter({
    name: 'gate402_challenges_total',
    help: 'Payment challenges issued in 402 answers, by protocol (one 402 usually carries both)',
    labelNames: ['protocol'],
    collect() {
      this.reset();
      for (const p of ['x402', 'mpp'] as const) this.labels(p).inc(issued[p]);
    },
  });

  const verifications = counter({
    name: 'gate402_verifications_total',
    help: 'Payment verifications (facilitator /verify and each settlement) by result and invalid reason',
    labelNames: ['result', 'reason'],
  });
  verifications.labels('valid', 'none').inc(0);
  for (const reason of INVALID_REASONS) verifications.labels('invalid', reason).inc(0);

  const transitions = counter({
    name: 'gate402_actor_transitions_total',
    help: 'State transitions of payment and order actors (`from` is `start` for the first state)',
    labelNames: ['machine', 'from', 'to'],
  });
  const stateDuration = histogram({
    name: 'gate402_actor_state_duration_seconds',
    help: 'Time payment and order actors spent in each state they left',
    labelNames: ['machine', 'state'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
  });

  const settlements = histogram({
    name: 'gate402_settlement_duration_seconds',
    help: 'Finished settlements by network and outcome (the final state: settled, failed, rejected, duplicate, stalled), from first sight of the payment to the end; `_count` is the settlement count',
    labelNames: ['network', 'outcome'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300],
  });

  const shed = counter({
    name: 'gate402_payments_shed_total',
    help: "New paid requests turned away with 503 and Retry-After, before anything was verified or charged, because their network's settlement was behind, by network and reason (queue_full, queue_slow, relayers_busy, client_share: the client was at its share of the queue); payer_over_balance counts payments refused (402, nothing charged) because their payer's balance did not cover them beside its payments in flight",
    labelNames: ['network', 'reason'],
  });

  const revertedGas = counter({
    name: 'gate402_settlement_reverted_gas_total',
    help: 'Gas our relayers burnt on settlements that passed simulation and reverted on chain (a batch member: its share of the batch), by network',
    labelNames: ['network'],
  });
  const revertedTxs = counter({
    name: 'gate402_settlement_reverted_total',
    help: 'Settlements (or batch members) that passed simulation and reverted on chain, by network: each bans its payer and its code',
    labelNames: ['network'],
  });
  const revertRefusals = counter({
    name: 'gate402_revert_budget_refusals_total',
    help: 'Contract payers refused before anything was sent, by kind: payer_banned and code_banned (a settlement of it or its code reverted), payer_gas, code_gas and total_gas (an hourly budget of reverted gas spent), code_busy (an unproven code settles one payment at a time)',
    labelNames: ['kind'],
  });
  for (const kind of REFUSAL_KINDS) revertRefusals.labels(kind).inc(0);

  const pendingSources: Array<() => number> = [];
  gauge({
    name: 'gate402_payments_pending',
    help: 'Payments being settled now',
    labelNames: [],
    collect() {
      this.set(pendingSources.reduce((sum, read) => sum + read(), 0));
    },
  });

  const relayerSources: Array<() => Iterable<RelayerSample>> = [];
  const eachRelayer = (gauge: Gauge<'network' | 'relayer'>, value: (r: RelayerSample) => number) => {
    gauge.reset();
    for (const read of relayerSources) for (const r of read()) gauge.labels(r.network, r.address).set(value(r));
  };
  gauge({
    name: 'gate402_relayer_balance_ether',
    help: 'Native gas balance of each relayer, in ether, as last read from the chain',
    labelNames: ['network', 'relayer'],
    collect() {
      eachRelayer(this, (r) => ether(r.balanceWei));
    },
  });
  const relayerMinBalance = gauge({
    name: 'gate402_relayer_min_balance_ether',
    help: 'Gas balance below which a relayer takes no new settlements (GATE402_RELAYER_MIN_BALANCE_GWEI), in ether',
    labelNames: [],
  });
  gauge({
    name: 'gate402_relayer_in_flight',
    help: 'Transactions each relayer has sent and not yet seen mined',
    labelNames: ['network', 'relayer'],
    collect() {
      eachRelayer(this, (r) => r.inFlight);
    },
  });

  const rpcDuration = histogram({
    name: 'gate402_rpc_request_duration_seconds',
    help: 'JSON-RPC calls by chain, method and outcome (ok, error), retries included; `_count` is the call count',
    labelNames: ['chain', 'method', 'outcome'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  });

  const poolSources = new Map<string, () => WorkerPoolSample>();
  gauge({
    name: 'gate402_worker_pool_queue_depth',
    help: 'Jobs waiting for a worker',
    labelNames: ['pool'],
    collect() {
      for (const [pool, read] of poolSources) this.labels(pool).set(read().queued);
    },
  });
  gauge({
    name: 'gate402_worker_pool_utilization',
    help: 'Share of the worker threads busy now (0 to 1)',
    labelNames: ['pool'],
    collect() {
      for (const [pool, read] of poolSources) {
        const s = read();
        this.labels(pool).set(s.threads > 0 ? Math.min(s.busy, s.threads) / s.threads : s.busy > 0 ? 1 : 0);
      }
    },
  });

  const lmdbCommit = histogram({
    name: 'gate402_lmdb_commit_duration_seconds',
    help: 'Durable LMDB writes, from the write until it is committed and flushed to disk',
    labelNames: [],
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  });

  const upstream = histogram({
    name: 'gate402_upstream_request_duration_seconds',
    help: 'Calls to merchant upstreams by merchant and outcome (2xx, 3xx, 4xx, 5xx, error); `_count` is the call count',
    labelNames: ['merchant', 'outcome'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  });
  const breakerSources: Array<() => Promise<Iterable<[string, BreakerStateName]>>> = [];
  gauge({
    name: 'gate402_upstream_circuit_state',
    help: 'Circuit breaker of each merchant upstream: 0 closed, 1 half-open, 2 open',
    labelNames: ['merchant'],
    async collect() {
      const states = await Promise.all(breakerSources.map((read) => read()));
      this.reset();
      for (const source of states) for (const [merchant, state] of source) this.labels(merchant).set(BREAKER_VALUE[state]);
    },
  });

  const storeErrors = counter({ name: 'gate402_store_errors_total', help: 'Durable writes that failed, by store (lmdb, postgres)', labelNames: ['store'] });
  const facilitatorErrors = counter({
    name: 'gate402_facilitator_errors_total',
    help: 'Calls to remote facilitators that brought no usable answer, by facilitator (host and path), network and kind (unreachable, timeout, connection_lost, http_5xx, http_4xx, bad_answer, unexpected_error); "local engine" (always 0) for a network this process settles itself',
    labelNames: ['facilitator', 'network', 'kind'],
  });
  const facilitatorFailovers = counter({
    name: 'gate402_facilitator_failovers_total',
    help: 'Payments passed on from a remote facilitator to the next one of their network, proven not settled by it (or while its breaker was open), by the facilitator left; "local engine" (always 0) for a network this process settles itself',
    labelNames: ['facilitator', 'network'],
  });
  const facilitatorSources: Array<{ names: string[]; state: (facilitator: string) => BreakerStateName }> = [];
  // Networks the engine settles (declareSettlements) and those remote facilitators settle (watchFacilitators): the
  // rest carry LOCAL_FACILITATOR's zero series, whichever of the two is called first.
  const engineNetworks = new Set<string>();
  const remoteNetworks = new Set<string>();
  const localNetworks = () => [...engineNetworks].filter((n) => !remoteNetworks.has(n));
  const facilitatorZero = (facilitator: string, network: string) => {
    facilitatorFailovers.labels(facilitator, network).inc(0);
    for (const kind of FACILITATOR_ERROR_KINDS) facilitatorErrors.labels(facilitator, network, kind).inc(0);
  };
  const forgetLocal = (network: string) => {
    facilitatorFailovers.remove(LOCAL_FACILITATOR, network);
    for (const kind of FACILITATOR_ERROR_KINDS) facilitatorErrors.remove(LOCAL_FACILITATOR, network, kind);
  };
  gauge({
    name: 'gate402_facilitator_circuit_state',
    help: `Circuit breaker of each remote facilitator: 0 closed, 1 half-open, 2 open ("${LOCAL_FACILITATOR}", always 0, when this process's engine settles some network itself)`,
    labelNames: ['facilitator'],
    collect() {
      this.reset();
      if (localNetworks().length > 0) this.labels(LOCAL_FACILITATOR).set(BREAKER_VALUE.closed);
      for (const source of facilitatorSources) for (const name of source.names) this.labels(name).set(BREAKER_VALUE[source.state(name)]);
    },
  });

  const revenue = counter({ name: 'gate402_revenue_usd_total', help: 'Price of the paid requests served, in USD, by merchant and protocol', labelNames: ['merchant', 'protocol'] });

  const stockOrders = counter({ name: 'gate402_stock_orders_total', help: 'Finished stock orders by symbol and outcome', labelNames: ['symbol', 'outcome'] });
  const stockOrderVolumeUsd = counter({ name: 'gate402_stock_order_volume_usd_total', help: 'Stablecoin paid for delivered stock orders, in USD, by symbol', labelNames: ['symbol'] });
  const stockRefunds = counter({ name: 'gate402_stock_refunds_total', help: 'Stock order refunds sent, by reason', labelNames: ['reason'] });
  const stockSponsorships = counter({ name: 'gate402_stock_sponsorships_total', help: 'Gas sponsorship requests by outcome (sent, or the refusal)', labelNames: ['outcome'] });

  const priceFloorAtoms = gauge({
    name: 'gate402_price_floor_atoms',
    help: "Each network's live price floor, in its stablecoin's atoms (the least a payment must move to pay for its settlement's gas)",
    labelNames: ['network'],
  });
  const priceFloorRefusals = counter({
    name: 'gate402_price_floor_refusals_total',
    help: "Payments refused before anything was sent for an amount below their network's price floor",
    labelNames: ['network'],
  });
  const gasPriceReadFailures = counter({
    name: 'gate402_gas_price_read_failures_total',
    help: 'Gas price reads for the price floor that failed or timed out (the last price read was kept)',
    labelNames: ['network'],
  });
  const stockSponsoredNative = counter({ name: 'gate402_stock_sponsored_native_total', help: 'Native coin sent as gas sponsorship, in whole coins (ether)', labelNames: [] as never[] });
  const stockSponsorBudgetLeft = gauge({
    name: 'gate402_stock_sponsor_budget_left_native',
    help: "What is left of the gas sponsorship's hourly budget, in whole native coins (ether)",
    labelNames: [] as never[],
  });

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
    definitions,
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

    verification(valid, reason) {
      verifications.labels(valid ? 'valid' : 'invalid', valid ? 'none' : reason).inc();
    },

    watchActor(machine, actor) {
      let state: string | undefined;
      let since = clock();
      actor.subscribe({
        next: (snapshot: { value: StateValue }) => {
          const next = statePath(snapshot.value);
          if (next === state) return;
          const now = clock();
          if (state !== undefined) stateDuration.labels(machine, state).observe((now - since) / 1000);
          transitions.labels(machine, state ?? 'start', next).inc();
          state = next;
          since = now;
        },
        // The actor's owner reports its errors; this observer only must not make them "unhandled".
        error: () => {},
      });
    },

    settlement(network, outcome, seconds) {
      settlements.labels(network, outcome).observe(seconds);
    },

    paymentShed(network, reason) {
      shed.labels(network, reason).inc();
    },

    revertedSettlement(network, gas) {
      revertedGas.labels(network).inc(Number(gas));
      revertedTxs.labels(network).inc();
    },

    revertRefusal(kind) {
      revertRefusals.labels(kind).inc();
    },

    rpcObserver(chain) {
      type Child = ReturnType<typeof rpcDuration.labels>;
      const children = new Map<string, { ok: Child; error: Child }>();
      return (method, seconds, failed) => {
        const c = children.get(method) ?? remember(children, method, { ok: rpcDuration.labels(chain, method, 'ok'), error: rpcDuration.labels(chain, method, 'error') });
        (failed ? c.error : c.ok).observe(seconds);
      };
    },

    lmdbCommit(seconds) {
      lmdbCommit.observe(seconds);
    },

    upstreamCall(merchant, status, seconds) {
      upstream.labels(merchant, status === 'error' ? 'error' : `${Math.floor(status / 100)}xx`).observe(seconds);
    },

    revenue(merchant, protocol, usd) {
      revenue.labels(merchant, protocol).inc(usd);
    },

    watchPendingPayments(read) {
      pendingSources.push(read);
    },
    watchRelayers(read) {
      relayerSources.push(read);
    },
    watchWorkerPool(pool, read) {
      poolSources.set(pool, read);
    },
    watchBreakers(read) {
      breakerSources.push(read);
    },
    watchMerchants(read) {
      merchantSources.push(read);
    },

    storeError(store) {
      storeErrors.labels(store).inc();
    },

    declareMachine(machine, definition) {
      const series = machineSeries(definition);
      for (const [from, to] of series.transitions) transitions.labels(machine, from, to).inc(0);
      for (const state of series.states) stateDuration.zero({ machine, state });
    },
    declareSettlements(networks, outcomes) {
      for (const network of networks) for (const outcome of outcomes) settlements.zero({ network, outcome });
      for (const network of networks) for (const reason of SHED_REASONS) shed.labels(network, reason).inc(0);
      for (const network of networks) engineNetworks.add(network);
      for (const network of localNetworks()) facilitatorZero(LOCAL_FACILITATOR, network);
      for (const network of networks) {
        revertedGas.labels(network).inc(0);
        revertedTxs.labels(network).inc(0);
      }
    },
    declareStore(store) {
      storeErrors.labels(store).inc(0);
    },
    declareRelayerMinBalance(wei) {
      relayerMinBalance.set(ether(wei));
    },
    declareStock(known) {
      for (const symbol of known.symbols) {
        stockOrderVolumeUsd.labels(symbol).inc(0);
        for (const outcome of known.outcomes) stockOrders.labels(symbol, outcome).inc(0);
      }
      for (const reason of known.refundReasons) stockRefunds.labels(reason).inc(0);
      for (const outcome of known.sponsorshipOutcomes) stockSponsorships.labels(outcome).inc(0);
    },

    watchFacilitators(facilitators, state) {
      const names = new Set<string>();
      for (const { facilitator, network } of facilitators) {
        names.add(facilitator);
        if (!remoteNetworks.has(network) && engineNetworks.has(network)) forgetLocal(network);
        remoteNetworks.add(network);
        facilitatorZero(facilitator, network);
      }
      facilitatorSources.push({ names: [...names], state });
    },
    facilitatorError(facilitator, network, kind) {
      facilitatorErrors.labels(facilitator, network, kind).inc();
    },
    facilitatorFailover(facilitator, network) {
      facilitatorFailovers.labels(facilitator, network).inc();
    },

    stockOrders,
    stockOrderVolumeUsd,
    stockRefunds,
    stockSponsorships,

    declarePriceFloor(networks) {
      for (const network of networks) {
        // 0 until the network's gas price is first read (no floor is in force before it: nothing is refused for it).
        priceFloorAtoms.labels(network).set(0);
        priceFloorRefusals.labels(network).inc(0);
        gasPriceReadFailures.labels(network).inc(0);
      }
    },
    priceFloorAtoms,
    priceFloorRefusals,
    gasPriceReadFailures,
    stockSponsoredNative,
    stockSponsorBudgetLeft,
  };
}

/** Puts `value` in `map` under `key` and returns it: a cache fill in one expression. */
function remember<K, V>(map: Map<K, V>, key: K, value: V): V {
  map.set(key, value);
  return value;
}
