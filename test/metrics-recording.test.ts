// What an operator reads on /metrics, without a devnet: route templates and bounded labels, the bearer token, actors.
import t from 'tap';
import { Histogram, Registry } from 'prom-client';
import { SeriesHistogram } from '../src/metrics/series-histogram.ts';
import { createActor, createMachine } from 'xstate';
import { createHttpServer, json } from '../src/http/server.ts';
import { metricsRoute } from '../src/metrics/endpoint.ts';
import { createMetrics } from '../src/metrics/metrics.ts';
import { parseExposition, scrape, valueOf as metricValue } from './helpers/prometheus.ts';

const REQUESTS = 'gate402_http_request_duration_seconds_count';

t.test('HTTP responses are counted by route template, never by raw path; odd methods fold into OTHER', async (t) => {
  const metrics = createMetrics();
  const server = createHttpServer({ host: '127.0.0.1', port: 0, maxBodyBytes: 10, observe: metrics.httpObserver('gateway'), log: () => {} });
  const route = metricsRoute(metrics, {});
  server.route('GET', '/m/:slug/*', () => json(402, { pay: true })).route(route.method, route.path, route.handler);
  const port = await server.listen();
  t.teardown(() => server.close());
  const base = `http://127.0.0.1:${port}`;
  for (const path of ['/m/weather/forecast', '/m/catjoke/joke?lang=en', '/m/0xAbCdEf0123456789/x/y/z']) t.equal((await fetch(`${base}${path}`)).status, 402);
  t.equal((await fetch(`${base}/no/such/0xdeadbeef`)).status, 404);
  t.equal((await fetch(`${base}/m/weather/forecast`, { method: 'PURGE' })).status, 405);
  t.equal((await fetch(`${base}/m/weather/forecast`, { method: 'POST', body: 'far more than ten bytes' })).status, 413);

  const m = await scrape(`${base}/metrics`);
  t.equal(metricValue(m, REQUESTS, { server: 'gateway', route: '/m/:slug/*', method: 'GET', status: '402' }), 3, 'three 402s under the template');
  t.equal(metricValue(m, REQUESTS, { route: 'unmatched', method: 'GET', status: '404' }), 1, 'an unknown path counts as unmatched');
  t.equal(metricValue(m, REQUESTS, { route: 'unmatched', method: 'OTHER', status: '405' }), 1, 'a made-up method is OTHER');
  t.equal(metricValue(m, REQUESTS, { route: 'unmatched', method: 'POST', status: '413' }), 1);
  t.ok((metricValue(m, 'gate402_http_request_duration_seconds_sum', { route: '/m/:slug/*' }) ?? 0) > 0, 'latency is observed');
  const values = m.samples.flatMap((s) => Object.values(s.labels));
  t.notOk(
    values.some((v) => /weather|catjoke|0x|deadbeef|PURGE/i.test(v)),
    'no raw path, address or method in any label',
  );
  t.equal(m.types.get('gate402_http_request_duration_seconds'), 'histogram');
  t.ok(metricValue(m, 'gate402_process_cpu_seconds_total') !== undefined, 'the default process metrics are there, prefixed');
});

t.test('with GATE402_METRICS_TOKEN set, /metrics wants the bearer token', async (t) => {
  const metrics = createMetrics({ defaultMetrics: false });
  const route = metricsRoute(metrics, { token: 's3cret' });
  const server = createHttpServer({ host: '127.0.0.1', port: 0, maxBodyBytes: 10 }).route(route.method, route.path, route.handler);
  const port = await server.listen();
  t.teardown(() => server.close());
  const url = `http://127.0.0.1:${port}/metrics`;
  t.equal((await fetch(url)).status, 401);
  t.equal((await fetch(url, { headers: { authorization: 'Bearer wrong' } })).status, 401);
  t.ok((await scrape(url, { authorization: 'Bearer s3cret' })).samples.length > 0);
});

t.test('an actor: every transition counted, the time in each state it left observed', async (t) => {
  let now = 1000;
  const metrics = createMetrics({ clock: () => now, defaultMetrics: false });
  const machine = createMachine({ id: 'order', initial: 'quoting', states: { quoting: { on: { QUOTED: 'swapping' } }, swapping: { on: { SWAPPED: 'delivered' } }, delivered: { type: 'final' } } });
  const actor = createActor(machine);
  metrics.watchActor('order', actor);
  actor.start();
  now += 1500;
  actor.send({ type: 'QUOTED' });
  now += 250;
  actor.send({ type: 'SWAPPED' });
  const m = parseExposition((await metrics.scrape()).body);
  for (const [from, to] of [
    ['start', 'quoting'],
    ['quoting', 'swapping'],
    ['swapping', 'delivered'],
  ]) {
    t.equal(metricValue(m, 'gate402_actor_transitions_total', { machine: 'order', from: from as string, to: to as string }), 1, `${from} -> ${to}`);
  }
  t.equal(metricValue(m, 'gate402_actor_state_duration_seconds_sum', { machine: 'order', state: 'quoting' }), 1.5);
  t.equal(metricValue(m, 'gate402_actor_state_duration_seconds_sum', { machine: 'order', state: 'swapping' }), 0.25);
  t.equal(metricValue(m, 'gate402_actor_state_duration_seconds_count', { machine: 'order', state: 'delivered' }), undefined, 'a final state has no duration');
});

t.test('declared from the machine: every transition and state an actor can report exists at zero before it runs', async (t) => {
  const metrics = createMetrics({ defaultMetrics: false });
  // A transient router (as the payment and order machines resume), a compound state, a transition on the parent.
  const machine = createMachine({
    id: 'order',
    initial: 'routing',
    context: { resume: false },
    states: {
      routing: { always: [{ guard: ({ context }) => context.resume, target: 'busy.waiting' }, { target: 'idle' }] },
      idle: { on: { GO: 'busy' } },
      busy: {
        initial: 'working',
        on: { FAIL: 'failed' },
        states: { working: { on: { WAIT: 'waiting' } }, waiting: { on: { DONE: '#order.done' } } },
      },
      done: { type: 'final' },
      failed: { type: 'final' },
    },
  });
  metrics.declareMachine('order', machine);
  const transitions = (m: ReturnType<typeof parseExposition>) =>
    m.samples
      .filter((s) => s.name === 'gate402_actor_transitions_total')
      .map((s) => `${s.labels.from} -> ${s.labels.to} = ${s.value}`)
      .sort();
  const declared = parseExposition((await metrics.scrape()).body);
  t.same(transitions(declared), [
    'busy.waiting -> done = 0',
    'busy.waiting -> failed = 0',
    'busy.working -> busy.waiting = 0',
    'busy.working -> failed = 0',
    'idle -> busy.working = 0',
    'start -> busy.waiting = 0',
    'start -> idle = 0',
  ]);
  t.same(
    declared.samples
      .filter((s) => s.name === 'gate402_actor_state_duration_seconds_count')
      .map((s) => s.labels.state)
      .sort(),
    ['busy.waiting', 'busy.working', 'idle'],
    'the states it rests in, not the transient router nor the final states',
  );
  const actor = createActor(machine);
  metrics.watchActor('order', actor);
  actor.start();
  for (const type of ['GO', 'WAIT', 'DONE']) actor.send({ type });
  const ran = parseExposition((await metrics.scrape()).body);
  t.same(
    transitions(ran).map((s) => s.replace(/ = \d+$/, '')),
    transitions(declared).map((s) => s.replace(/ = \d+$/, '')),
    'the run made no series that was not declared',
  );
  t.same(
    transitions(ran).filter((s) => s.endsWith('= 1')),
    ['busy.waiting -> done = 1', 'busy.working -> busy.waiting = 1', 'idle -> busy.working = 1', 'start -> idle = 1'],
  );
});

t.test("the HTTP histogram's series expose exactly what a prom-client Histogram would", async (t) => {
  const buckets = [0.001, 0.01, 0.1, 1];
  const theirs = new Registry();
  const ours = new Registry();
  const reference = new Histogram({ name: 'h_seconds', help: 'help', labelNames: ['route', 'status'], buckets, registers: [theirs] });
  const fast = new SeriesHistogram('h_seconds', 'help', ['route', 'status'], buckets, [ours]);
  const a = fast.series('/m/:slug/*', '402');
  const b = fast.series('/health', '200');
  fast.series('/never', '500'); // a series never observed is not exposed, as prom-client shows none before the first observation
  for (const v of [0.0005, 0.001, 0.002, 0.5, 7]) {
    reference.labels('/m/:slug/*', '402').observe(v);
    a(v);
  }
  reference.labels('/health', '200').observe(0.05);
  b(0.05);
  t.equal(await ours.metrics(), await theirs.metrics(), 'the text exposition, byte for byte');
  t.same(await ours.getMetricsAsJSON(), await theirs.getMetricsAsJSON(), 'and the JSON form');
  fast.reset();
  reference.reset();
  t.equal(await ours.metrics(), await theirs.metrics(), 'reset empties both');
});
