// The Grafana files: provisioning that Grafana reads, dashboards in its JSON model, and every query naming metrics
// (and labels) the code defines.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createMetrics, LOCAL_FACILITATOR } from '../src/metrics/metrics.ts';
import { parseExposition, type Exposition, valueOf as sampleValue } from './helpers/prometheus.ts';

const GRAFANA = 'grafana';
const DASHBOARDS = join(GRAFANA, 'dashboards');
const PANEL_TYPES = new Set(['row', 'stat', 'timeseries', 'bargauge', 'gauge', 'table', 'text']);
/** Labels Prometheus adds to every series it scrapes. */
const TARGET_LABELS = ['instance', 'job'];

const metrics = createMetrics();
const registered = new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name));
// prom-client types `type` as an enum; at run time it is the exposition's word.
const histograms = new Set((await metrics.registry.getMetricsAsJSON()).filter((m) => String(m.type) === 'histogram').map((m) => m.name));
const labelsOf = new Map(metrics.definitions.map((d) => [d.name, d.labelNames]));

const datasourceYaml = readFileSync(join(GRAFANA, 'provisioning/datasources/prometheus.yaml'), 'utf8');
const datasourceUid = /^\s+uid:\s*(\S+)\s*$/m.exec(datasourceYaml)?.[1];

t.test('provisioning: a Prometheus datasource and a file dashboard provider', async (t) => {
  t.match(datasourceYaml, /^apiVersion: 1$/m);
  t.match(datasourceYaml, /^\s+type: prometheus$/m);
  t.ok(datasourceUid, 'the datasource has a uid the dashboards refer to');
  const provider = readFileSync(join(GRAFANA, 'provisioning/dashboards/gate402.yaml'), 'utf8');
  t.match(provider, /^apiVersion: 1$/m);
  t.match(provider, /^\s+type: file$/m);
  t.match(provider, /^\s+path: \/\S+$/m, 'an absolute path to mount grafana/dashboards at');
});

/** The metric a series name belongs to (`x_bucket` of histogram `x` is `x`); undefined when the code has none. */
function metricOf(series: string): string | undefined {
  if (registered.has(series)) return series;
  const base = series.replace(/_(bucket|count|sum)$/, '');
  return histograms.has(base) ? base : undefined;
}

/** What is wrong with a PromQL expression: unknown metrics, labels no metric in it has, unbalanced brackets. */
function problemsOf(expr: string, legend: string | undefined): string[] {
  const problems: string[] = [];
  const series = [...expr.matchAll(/\bgate402_[A-Za-z0-9_]+/g)].map((m) => m[0]);
  if (series.length === 0) problems.push('names no gate402_ metric');
  const known = new Set(TARGET_LABELS);
  for (const s of series) {
    const metric = metricOf(s);
    if (metric === undefined) problems.push(`${s} is not a metric the code registers`);
    else for (const l of labelsOf.get(metric) ?? []) known.add(l);
    if (s.endsWith('_bucket')) known.add('le');
  }
  for (const [, name, matchers] of expr.matchAll(/(gate402_[A-Za-z0-9_]+)\{([^}]*)\}/g)) {
    const metric = metricOf(name as string);
    const own = new Set([...TARGET_LABELS, ...(metric ? (labelsOf.get(metric) ?? []) : []), ...((name as string).endsWith('_bucket') ? ['le'] : [])]);
    for (const [, label] of (matchers as string).matchAll(/([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)\s*"/g)) if (!own.has(label as string)) problems.push(`${name} has no label ${label}`);
  }
  for (const [, list] of expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)) {
    for (const label of (list as string)
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean))
      if (!known.has(label)) problems.push(`no metric here has a label ${label} to group by`);
  }
  for (const [, label] of (legend ?? '').matchAll(/\{\{\s*(\w+)\s*\}\}/g)) if (!known.has(label as string)) problems.push(`the legend names a label ${label} no metric here has`);
  for (const [open, close] of [
    ['(', ')'],
    ['{', '}'],
    ['[', ']'],
  ] as const) {
    if (expr.split(open).length !== expr.split(close).length) problems.push(`unbalanced ${open}${close}`);
  }
  return problems;
}

interface Panel {
  id: unknown;
  type: unknown;
  title: unknown;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: { type?: unknown; uid?: unknown };
  targets?: Array<{ refId?: unknown; expr?: unknown; legendFormat?: string; datasource?: { type?: unknown; uid?: unknown } }>;
}

const files = readdirSync(DASHBOARDS).filter((f) => f.endsWith('.json'));
const used = new Set<string>();
const uids = new Set<string>();

t.test('there are the overview, settlement engine and stock orders dashboards', async (t) => {
  t.same(files.sort(), ['overview.json', 'settlement-engine.json', 'stock-orders.json']);
});

for (const file of files) {
  t.test(`grafana/dashboards/${file}`, async (t) => {
    const d = JSON.parse(readFileSync(join(DASHBOARDS, file), 'utf8')) as Record<string, unknown> & { panels: Panel[] };
    t.type(d.uid, 'string');
    t.ok(typeof d.uid === 'string' && /^[a-zA-Z0-9_-]{1,40}$/.test(d.uid) && !uids.has(d.uid), 'a unique uid Grafana accepts');
    uids.add(d.uid as string);
    t.ok(typeof d.title === 'string' && d.title.length > 0, 'a title');
    t.ok(Number.isInteger(d.schemaVersion) && (d.schemaVersion as number) >= 30, 'a schemaVersion');
    t.ok(Array.isArray((d.templating as { list?: unknown })?.list), 'templating.list');
    t.ok(Array.isArray((d.annotations as { list?: unknown })?.list), 'annotations.list');
    t.ok(typeof (d.time as { from?: unknown })?.from === 'string', 'a time range');
    t.ok(Array.isArray(d.panels) && d.panels.length > 0, 'panels');
    const ids = new Set<unknown>();
    for (const p of d.panels) {
      const where = `panel ${String(p.id)} "${String(p.title)}"`;
      t.ok(Number.isInteger(p.id) && (p.id as number) > 0 && !ids.has(p.id), `${where}: a unique id`);
      ids.add(p.id);
      t.ok(PANEL_TYPES.has(p.type as string), `${where}: a known type`);
      const g = p.gridPos;
      t.ok(g && [g.h, g.w, g.x, g.y].every(Number.isInteger) && g.h > 0 && g.w > 0 && g.x >= 0 && g.y >= 0 && g.x + g.w <= 24, `${where}: gridPos on the 24-column grid`);
      for (const q of d.panels) {
        if (q === p) break;
        const h = q.gridPos;
        const overlap = g.x < h.x + h.w && h.x < g.x + g.w && g.y < h.y + h.h && h.y < g.y + g.h;
        if (overlap) t.fail(`${where} overlaps panel ${String(q.id)}`);
      }
      if (p.type === 'row') continue;
      t.same(p.datasource, { type: 'prometheus', uid: datasourceUid }, `${where}: the provisioned datasource`);
      t.ok(Array.isArray(p.targets) && p.targets.length > 0, `${where}: targets`);
      const refs = new Set<unknown>();
      for (const target of p.targets ?? []) {
        t.ok(typeof target.refId === 'string' && !refs.has(target.refId), `${where}: a unique refId`);
        refs.add(target.refId);
        t.same(target.datasource, p.datasource, `${where}: the target queries the panel's datasource`);
        t.ok(typeof target.expr === 'string' && target.expr.length > 0, `${where}: an expr`);
        const expr = String(target.expr);
        t.same(problemsOf(expr, target.legendFormat), [], `${where}: ${expr}`);
        for (const m of expr.matchAll(/\bgate402_[A-Za-z0-9_]+/g)) {
          const metric = metricOf(m[0]);
          if (metric) used.add(metric);
        }
      }
    }
  });
}

t.test('every metric the code defines is on some dashboard', async (t) => {
  for (const d of metrics.definitions) t.ok(used.has(d.name), d.name);
});

// The facilitator panels read series that exist only once a part declares who settles each network: its engine
// (declareSettlements, on every part) or remote facilitators (watchFacilitators, a gateway with GATE402_FACILITATORS).
// Both orders of the two calls, as a part starts, give the same series.
const facilitatorNames = [...new Set(files.flatMap((f) => [...readFileSync(join(DASHBOARDS, f), 'utf8').matchAll(/\bgate402_facilitator_\w+/g)].map((m) => m[0])))].sort();
const A = 'eip155:84532';
const B = 'eip155:8453';
const REMOTE = 'f1.example/x402';

async function exposition(setup: (m: ReturnType<typeof createMetrics>) => void): Promise<Exposition> {
  const m = createMetrics({ defaultMetrics: false });
  setup(m);
  return parseExposition((await m.scrape()).body);
}
const facilitatorsOf = (e: Exposition, name: string) => [...new Set(e.samples.filter((s) => s.name === name).map((s) => `${s.labels.facilitator} ${s.labels.network ?? ''}`.trim()))].sort();

t.test('the facilitator series the panels query exist at zero from the first scrape, whoever settles', async (t) => {
  t.same(facilitatorNames, ['gate402_facilitator_circuit_state', 'gate402_facilitator_errors_total', 'gate402_facilitator_failovers_total'], 'the panels query three facilitator series');
  const empty = await exposition(() => {});
  t.same(
    facilitatorNames.filter((n) => empty.samples.some((s) => s.name === n)),
    [],
    'before a part says who settles, there is nothing to show (this is what a test must not stop at)',
  );

  const local = await exposition((m) => m.declareSettlements([A, B], ['settled']));
  for (const name of facilitatorNames)
    t.ok(
      local.samples.some((s) => s.name === name),
      `engine only: ${name} has a series`,
    );
  t.same(facilitatorsOf(local, 'gate402_facilitator_failovers_total'), [`${LOCAL_FACILITATOR} ${B}`, `${LOCAL_FACILITATOR} ${A}`].sort(), 'one failover series per network, the local engine');
  t.equal(sampleValue(local, 'gate402_facilitator_failovers_total'), 0, 'at zero');
  t.equal(sampleValue(local, 'gate402_facilitator_errors_total', { facilitator: LOCAL_FACILITATOR, network: A, kind: 'unreachable' }), 0, 'errors at zero');
  t.same(facilitatorsOf(local, 'gate402_facilitator_circuit_state'), [LOCAL_FACILITATOR], 'one breaker series: the local engine');
  t.equal(sampleValue(local, 'gate402_facilitator_circuit_state'), 0, 'closed');
  t.equal(local.samples.filter((s) => s.name.startsWith('gate402_facilitator_')).length, 1 + 2 + 2 * 4, 'bounded: one breaker, and per network one failover and four error kinds');

  for (const order of ['engine first', 'remote first'] as const) {
    const mixed = await exposition((m) => {
      const engine = () => m.declareSettlements([A, B], ['settled']);
      const remote = () => m.watchFacilitators([{ facilitator: REMOTE, network: B }], () => 'open');
      if (order === 'engine first') {
        engine();
        remote();
      } else {
        remote();
        engine();
      }
    });
    t.same(facilitatorsOf(mixed, 'gate402_facilitator_failovers_total'), [`${REMOTE} ${B}`, `${LOCAL_FACILITATOR} ${A}`].sort(), `${order}: B is settled remotely, A by the engine`);
    t.same(facilitatorsOf(mixed, 'gate402_facilitator_errors_total'), [`${REMOTE} ${B}`, `${LOCAL_FACILITATOR} ${A}`].sort(), `${order}: error series likewise`);
    t.equal(sampleValue(mixed, 'gate402_facilitator_circuit_state', { facilitator: REMOTE }), 2, `${order}: the remote breaker as read (open)`);
    t.equal(sampleValue(mixed, 'gate402_facilitator_circuit_state', { facilitator: LOCAL_FACILITATOR }), 0, `${order}: the engine's, closed`);
  }

  const remoteOnly = await exposition((m) => {
    m.declareSettlements([A], ['settled']);
    m.watchFacilitators([{ facilitator: REMOTE, network: A }], () => 'closed');
  });
  t.same(facilitatorsOf(remoteOnly, 'gate402_facilitator_circuit_state'), [REMOTE], 'every network settled remotely: no local engine series');
  t.same(facilitatorsOf(remoteOnly, 'gate402_facilitator_failovers_total'), [`${REMOTE} ${A}`]);
});
