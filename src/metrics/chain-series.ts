/**
 * What the chains cost and carry: the relayers' gas balances and transactions in flight, JSON-RPC call durations,
 * and the signature worker pool. Gauges are read from their owners when Prometheus scrapes.
 */
import type { Gauge } from 'prom-client';
import { ether, type MetricKit, remember } from './metric-kit.ts';
import type { RpcObserver } from './observers.ts';

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

export interface ChainSeries {
  rpcObserver(chain: string): RpcObserver;
  declareRelayerMinBalance(wei: bigint): void;
  watchRelayers(read: () => Iterable<RelayerSample>): void;
  watchWorkerPool(pool: string, read: () => WorkerPoolSample): void;
  /** What a reorg did to a transaction gate402 had seen mined (see `tx/reorg-guard.ts`): moved, resent, reverted_after_reorg, lost. */
  reorgedTransaction(network: string, outcome: string): void;
  /** The reorg outcomes on each network, at zero. */
  declareReorgOutcomes(networks: readonly string[], outcomes: readonly string[]): void;
}

export function chainSeries(kit: MetricKit): ChainSeries {
  const relayerSources: Array<() => Iterable<RelayerSample>> = [];
  const eachRelayer = (gauge: Gauge<'network' | 'relayer'>, value: (r: RelayerSample) => number) => {
    gauge.reset();
    for (const read of relayerSources) for (const r of read()) gauge.labels(r.network, r.address).set(value(r));
  };
  kit.gauge({
    name: 'gate402_relayer_balance_ether',
    help: 'Native gas balance of each relayer, in ether, as last read from the chain',
    labelNames: ['network', 'relayer'],
    collect() {
      eachRelayer(this, (r) => ether(r.balanceWei));
    },
  });
  const relayerMinBalance = kit.gauge({
    name: 'gate402_relayer_min_balance_ether',
    help: 'Gas balance below which a relayer takes no new settlements (GATE402_RELAYER_MIN_BALANCE_GWEI), in ether',
    labelNames: [],
  });
  kit.gauge({
    name: 'gate402_relayer_in_flight',
    help: 'Transactions each relayer has sent and not yet seen mined',
    labelNames: ['network', 'relayer'],
    collect() {
      eachRelayer(this, (r) => r.inFlight);
    },
  });

  const rpcDuration = kit.histogram({
    name: 'gate402_rpc_request_duration_seconds',
    help: 'JSON-RPC calls by chain, method and outcome (ok, error), retries included; `_count` is the call count',
    labelNames: ['chain', 'method', 'outcome'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  });

  const poolSources = new Map<string, () => WorkerPoolSample>();
  kit.gauge({
    name: 'gate402_worker_pool_queue_depth',
    help: 'Jobs waiting for a worker',
    labelNames: ['pool'],
    collect() {
      for (const [pool, read] of poolSources) this.labels(pool).set(read().queued);
    },
  });
  kit.gauge({
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

  const reorged = kit.counter({
    name: 'gate402_reorged_transactions_total',
    help: 'Mined transactions a chain reorganisation touched, by network and outcome: moved (mined in another block), resent (dropped; the same signed bytes sent again), reverted_after_reorg and lost (what they settled was served and is not paid: alert)',
    labelNames: ['network', 'outcome'],
  });

  return {
    reorgedTransaction(network, outcome) {
      reorged.labels(network, outcome).inc();
    },
    declareReorgOutcomes(networks, outcomes) {
      for (const n of networks) for (const o of outcomes) reorged.labels(n, o).inc(0);
    },
    rpcObserver(chain) {
      type Child = ReturnType<typeof rpcDuration.labels>;
      const children = new Map<string, { ok: Child; error: Child }>();
      return (method, seconds, failed) => {
        const c = children.get(method) ?? remember(children, method, { ok: rpcDuration.labels(chain, method, 'ok'), error: rpcDuration.labels(chain, method, 'error') });
        (failed ? c.error : c.ok).observe(seconds);
      };
    },
    declareRelayerMinBalance(wei) {
      relayerMinBalance.set(ether(wei));
    },
    watchRelayers(read) {
      relayerSources.push(read);
    },
    watchWorkerPool(pool, read) {
      poolSources.set(pool, read);
    },
  };
}
