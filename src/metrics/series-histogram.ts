import type { Registry } from 'prom-client';

/** One labelled series' observer: a bucket index found by comparison, two additions. */
export type Observe = (value: number) => void;

interface Series {
  labels: Readonly<Record<string, string>>;
  /** Per bucket (not cumulative), the last one for values above every bound (`+Inf`). */
  counts: Float64Array;
  sum: number;
  count: number;
}

interface ValuePair {
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string>;
  value: number;
  metricName: string;
  /** Exemplars are not kept: null on buckets and absent on `_sum` and `_count`, as prom-client has them then. */
  exemplar?: null | undefined;
}

/**
 * A Prometheus histogram for the per-request hot path, exposed on a prom-client registry exactly as prom-client's
 * Histogram exposes one. prom-client's `observe` validates and hashes the label set and keys its buckets by the
 * bound turned to a string on every call (11% of the gateway's CPU per unpaid 402); here a labelled series is looked
 * up once by its owner, and an observation is a comparison loop and two additions.
 */
export class SeriesHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #bounds: readonly number[];
  readonly #series: Series[] = [];

  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  constructor(name: string, help: string, labelNames: readonly string[], buckets: readonly number[], registers: readonly Registry[]) {
    this.name = name;
    this.help = help;
    this.labelNames = labelNames;
    this.#bounds = [...buckets].sort((a, b) => a - b);
    // A metric is anything with name, help, type and get(): the registry formats what get() returns.
    for (const r of registers) r.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** The observer of the series with these label values (in `labelNames` order); keep it, it is the fast path. */
  series(...values: string[]): Observe {
    if (values.length !== this.labelNames.length) throw new TypeError(`${this.name} takes ${this.labelNames.length} labels, got ${values.length}`);
    const labels = Object.freeze(Object.fromEntries(this.labelNames.map((n, i) => [n, values[i] as string])));
    const s: Series = { labels, counts: new Float64Array(this.#bounds.length + 1), sum: 0, count: 0 };
    this.#series.push(s);
    const bounds = this.#bounds;
    return (value) => {
      if (!Number.isFinite(value)) return;
      let i = 0;
      while (i < bounds.length && value > (bounds[i] as number)) i++;
      s.counts[i] = (s.counts[i] as number) + 1;
      s.sum += value;
      s.count += 1;
    };
  }

  /** What prom-client's registry formats: for each observed series, cumulative buckets, `+Inf`, `_sum`, `_count`. */
  async getForPromString(): Promise<{ name: string; help: string; type: string; values: ValuePair[]; aggregator: string }> {
    const values: ValuePair[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.#series) {
      if (s.count === 0) continue;
      let acc = 0;
      this.#bounds.forEach((le, i) => {
        acc += s.counts[i] as number;
        values.push({ labels: { le }, sharedLabels: { ...s.labels }, value: acc, metricName: bucket, exemplar: null });
      });
      values.push({ labels: { le: '+Inf' }, sharedLabels: { ...s.labels }, value: s.count, metricName: bucket, exemplar: null });
      values.push({ labels: {}, sharedLabels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum`, exemplar: undefined });
      values.push({ labels: {}, sharedLabels: { ...s.labels }, value: s.count, metricName: `${this.name}_count`, exemplar: undefined });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** As prom-client's `get()`: the series' labels merged into each value's. */
  async get(): Promise<{ name: string; help: string; type: string; values: Array<Omit<ValuePair, 'sharedLabels'>>; aggregator: string }> {
    const data = await this.getForPromString();
    return { ...data, values: data.values.map(({ sharedLabels, labels, ...rest }) => ({ ...rest, labels: { ...labels, ...sharedLabels } })) };
  }

  reset(): void {
    for (const s of this.#series) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}
