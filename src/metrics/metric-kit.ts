/**
 * How the metrics are made: every metric is defined on the process's one registry through a {@link MetricKit}, which
 * also lists its definition (name, type, labels) for the dashboards test to check panel queries against.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** A metric as defined here: what the dashboards test checks panel queries against. */
export interface MetricDefinition {
  name: string;
  type: 'counter' | 'gauge' | 'histogram';
  labelNames: readonly string[];
}

export type BreakerStateName = 'closed' | 'half-open' | 'open';

/** A breaker's state as a gauge value: 0 closed, 1 half-open, 2 open. */
export const BREAKER_VALUE: Record<BreakerStateName, number> = { closed: 0, 'half-open': 1, open: 2 };

export interface MetricKit {
  readonly registry: Registry;
  readonly definitions: MetricDefinition[];
  /** Lists a metric's definition and returns its configuration (for metrics made outside the three helpers). */
  define<T extends { name: string; labelNames?: readonly string[] }>(type: MetricDefinition['type'], config: T): T;
  counter<L extends string>(config: { name: string; help: string; labelNames: readonly L[]; collect?: (this: Counter<L>) => void }): Counter<L>;
  gauge<L extends string>(config: { name: string; help: string; labelNames: readonly L[]; collect?: (this: Gauge<L>) => void | Promise<void> }): Gauge<L>;
  histogram<L extends string>(config: { name: string; help: string; labelNames: readonly L[]; buckets: number[] }): Histogram<L>;
}

export function metricKit(registry: Registry): MetricKit {
  const definitions: MetricDefinition[] = [];
  const registers = [registry];
  const define = <T extends { name: string; labelNames?: readonly string[] }>(type: MetricDefinition['type'], config: T): T => {
    definitions.push({ name: config.name, type, labelNames: config.labelNames ?? [] });
    return config;
  };
  return {
    registry,
    definitions,
    define,
    counter: (config) => new Counter({ ...define('counter', config), registers }),
    gauge: (config) => new Gauge({ ...define('gauge', config), registers }),
    histogram: (config) => new Histogram({ ...define('histogram', config), registers }),
  };
}

const WEI_PER_ETHER = 10n ** 18n;

/** `wei` in whole ether, as a float (exact to the float's precision, also above 2^53 wei). */
export function ether(wei: bigint): number {
  const whole = wei / WEI_PER_ETHER;
  return Number(whole) + Number(wei - whole * WEI_PER_ETHER) / 1e18;
}

/** Puts `value` in `map` under `key` and returns it: a cache fill in one expression. */
export function remember<K, V>(map: Map<K, V>, key: K, value: V): V {
  map.set(key, value);
  return value;
}
