// What an operator runs: a real Prometheus (Debian's package) scraping a gateway and a facilitator during paid
// requests, every Grafana panel query evaluated through its HTTP API, and the shipped alerting rules checked by
// promtool, unit-tested by promtool, and firing live for a relayer drained of gas and a part that stopped answering.
import t from 'tap';
import { HTTPFacilitatorClient } from '@x402/core/http';
import { x402Client } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEther, parseUnits, toHex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { startFixtureUpstreams } from '../src/devnet/fixtures/server.ts';
import { LOCAL_FACILITATOR } from '../src/metrics/metrics.ts';
import { freshAccount, network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { spawnPaidGateway, until } from './helpers/paid-gateway.ts';
import { fundedPayer, officialPayment, requirementsFor } from './helpers/payments.ts';
import { scrape, valueOf as metricValue, type Exposition } from './helpers/prometheus.ts';
import { promtool, startPrometheus, type InstantResult } from './helpers/prometheus-server.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';
import { gassedKey } from './helpers/stock.ts';
import { tempDir } from './helpers/temp-dir.ts';

const started = Date.now();
const manifest = testDevnet();
const base = network(manifest, CAIP2.base);
const funder = tester('operators');
const ALERTS = 'prometheus/alerts.yml';
const PAID = 3;
/** Relayer gas is read every second here (30 s by default), so a drained relayer shows on the next scrape. */
const FAST = { GATE402_RELAYER_WATCH_MS: '1000' };

function alertNames(rules: string): string[] {
  return [...rules.matchAll(/^\s+- alert: (\w+)$/gm)].map((m) => m[1] as string);
}

// --- The dashboards' queries -------------------------------------------------------------------------------------

interface PanelQuery {
  dashboard: string;
  title: string;
  expr: string;
}

const panelQueries: PanelQuery[] = readdirSync('grafana/dashboards')
  .filter((f) => f.endsWith('.json'))
  .flatMap((file) => {
    const d = JSON.parse(readFileSync(join('grafana/dashboards', file), 'utf8')) as { panels: Array<{ title: string; targets?: Array<{ expr: string }> }> };
    return d.panels.flatMap((p) => (p.targets ?? []).map((target) => ({ dashboard: file, title: p.title, expr: target.expr })));
  });
/** Grafana's variables, as Grafana would fill them for "the last 5 minutes" at a 1 s scrape interval. */
const grafanaVariables = (expr: string) => expr.replaceAll('$__rate_interval', '4s').replaceAll('$__interval', '1s').replaceAll('$__range', '5m');
/** Every sample name the dashboards read (`x_bucket` of a histogram is its own name in the exposition). */
const dashboardNames = [...new Set(panelQueries.flatMap((q) => [...q.expr.matchAll(/\bgate402_\w+/g)].map((m) => m[0])))];
/** What only a gateway has: merchants and the stock desk. */
// Channel claims and sweeps are the gateway's (its paywall accepts the vouchers they claim); deposits are the engine's.
const gatewayOnly = (name: string) => /revenue|upstream|stock|channel_(claim|sweep|unclaimed|withdraw|refund|vouchers)|channels_open/.test(name);

// --- The parts, fresh ----------------------------------------------------------------------------------------------

const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());
const paid = await spawnPaidGateway(manifest, new URL(fixtures.baseUrlFor('catjoke')).origin, {
  ...FAST,
  GATE402_STOCK_ENABLED: 'true',
  GATE402_STOCK_DESK_KEY: await gassedKey(network(manifest, CAIP2.stockChain)),
});
const gw = paid.gw;
t.teardown(() => gw.stop());
// The facilitator's relayer, with gas on every chain (a relayer without gas anywhere is an alert, rightly).
const facilitatorKey = await gassedKey(base);
for (const n of Object.values(manifest.networks)) await rpcCall(n.rpcUrl, 'anvil_setBalance', [privateKeyToAccount(facilitatorKey).address, toHex(parseEther('10'))]);
const fac = await spawnFacilitator({ manifestPath: TEST_MANIFEST_PATH, env: { ...FAST, GATE402_RELAYER_KEYS: facilitatorKey } });
t.teardown(() => fac.stop());
const freshGateway = await scrape(`${gw.url}/metrics`);
const freshFacilitator = await scrape(`${fac.url}/metrics`);

const names = (m: Exposition) => new Set(m.samples.map((s) => s.name));
const series = (m: Exposition, name: string, labels: Record<string, string>) =>
  new Set(m.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).map((s) => JSON.stringify(s.labels)));

// --- Prometheus during a paid run ----------------------------------------------------------------------------------

// The shipped rules with every `for:` at 2 s (their expressions untouched): a condition fires within seconds, and one
// slow scrape on a busy machine (up == 0 once) fires nothing.
const shipped = readFileSync(ALERTS, 'utf8');
const fastRules = shipped.replace(/^(\s+for:\s*)\S+$/gm, '$12s');
const prometheus = await startPrometheus({
  jobs: [
    { name: 'gate402-gateway', target: new URL(gw.url).host },
    { name: 'gate402-facilitator', target: new URL(fac.url).host },
  ],
  ruleFiles: [writeRules(fastRules)],
});
t.teardown(() => prometheus.stop());

function writeRules(text: string): string {
  const dir = tempDir('rules');
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'alerts.yml'), text);
  return join(dir, 'alerts.yml');
}

const values = (r: InstantResult): number[] =>
  r.resultType === 'scalar' ? [Number((r.result as [number, string])[1])] : (r.result as Array<{ value: [number, string] }>).map((s) => Number(s.value[1]));

t.test('promtool: the rules and the example configuration are valid, and each alert fires on its unit test', async (t) => {
  t.match(promtool(['check', 'rules', ALERTS]), /SUCCESS: \d+ rules found/);
  t.match(promtool(['check', 'config', 'prometheus/prometheus.yml']), /SUCCESS/);
  t.match(promtool(['test', 'rules', 'alerts.test.yml'], 'prometheus'), /SUCCESS/);
  const changed = fastRules.split('\n').filter((line, i) => line !== shipped.split('\n')[i]);
  t.ok(changed.length > 0 && changed.every((line) => /^\s+for: 2s$/.test(line)), 'the rules Prometheus runs here differ from the shipped ones in `for:` only');
  const alerts = alertNames(readFileSync(ALERTS, 'utf8'));
  const tested = new Set([...readFileSync('prometheus/alerts.test.yml', 'utf8').matchAll(/alertname: (\w+)/g)].map((m) => m[1]));
  t.same(
    alerts.filter((a) => !tested.has(a)),
    [],
    'every alert has a unit test',
  );
  for (const needed of ['Gate402RelayerGasLow', 'Gate402PaymentsPendingGrowing', 'Gate402SettlementFailures', 'Gate402UpstreamCircuitOpen', 'Gate402SignaturePoolSaturated', 'Gate402StoreErrors']) {
    t.ok(alerts.includes(needed), needed);
  }
});

t.test('on a fresh start, every metric the dashboards query is on /metrics, at zero where nothing happened yet', async (t) => {
  t.ok(dashboardNames.length >= 20, `${dashboardNames.length} names`);
  const g = names(freshGateway);
  const f = names(freshFacilitator);
  // No name is left out: the facilitator panels' series exist too. These parts settle with their own engine, so the
  // facilitator is the local engine (test/facilitator-failover.test.ts checks the remote facilitators' series).
  t.same(
    dashboardNames.filter((n) => !g.has(n)),
    [],
    'absent from the gateway',
  );
  t.same(
    dashboardNames.filter((n) => !gatewayOnly(n) && !f.has(n)),
    [],
    'absent from the facilitator (merchants and stock orders are the gateway’s)',
  );
  for (const m of [freshGateway, freshFacilitator]) {
    t.equal(metricValue(m, 'gate402_actor_transitions_total', { machine: 'payment', from: 'start', to: 'verifying' }), 0);
    t.equal(metricValue(m, 'gate402_actor_state_duration_seconds_count', { machine: 'payment', state: 'inFlight.confirming' }), 0);
    t.equal(metricValue(m, 'gate402_settlement_duration_seconds_count', { network: CAIP2.base, outcome: 'settled' }), 0);
    t.equal(metricValue(m, 'gate402_settlement_duration_seconds_count', { network: CAIP2.stockChain, outcome: 'stalled' }), 0);
    t.equal(metricValue(m, 'gate402_verifications_total', { result: 'invalid', reason: 'invalid_exact_evm_signature' }), 0);
    t.equal(metricValue(m, 'gate402_store_errors_total', { store: 'lmdb' }), 0);
    t.equal(metricValue(m, 'gate402_relayer_min_balance_ether'), 0.001, 'GATE402_RELAYER_MIN_BALANCE_GWEI, in ether');
    t.equal(metricValue(m, 'gate402_facilitator_circuit_state', { facilitator: LOCAL_FACILITATOR }), 0, 'the local engine settles: its breaker series, closed');
    t.equal(metricValue(m, 'gate402_facilitator_failovers_total', { facilitator: LOCAL_FACILITATOR, network: CAIP2.base }), 0);
    t.equal(metricValue(m, 'gate402_facilitator_errors_total', { facilitator: LOCAL_FACILITATOR, network: CAIP2.base, kind: 'timeout' }), 0);
  }
  t.equal(metricValue(freshGateway, 'gate402_revenue_usd_total', { merchant: 'catjoke', protocol: 'mpp' }), 0);
  t.equal(metricValue(freshGateway, 'gate402_upstream_request_duration_seconds_count', { merchant: 'catjoke', outcome: '2xx' }), 0);
  t.equal(metricValue(freshGateway, 'gate402_stock_orders_total', { symbol: 'TSLA', outcome: 'delivered' }), 0);
  t.equal(metricValue(freshGateway, 'gate402_stock_refunds_total', { reason: 'swap_reverted' }), 0);
  t.equal(metricValue(freshGateway, 'gate402_stock_sponsorships_total', { outcome: 'sent' }), 0);
  t.equal(metricValue(freshGateway, 'gate402_actor_transitions_total', { machine: 'order', from: 'swapping', to: 'confirmingSwap' }), 0);
});

t.test('both parts are scraped and healthy', async (t) => {
  await until(async () => values(await prometheus.query('count(up{job=~"gate402-.*"} == 1)'))[0] === 2, 'both targets up', 30_000);
  const targets = await prometheus.api<{ activeTargets: Array<{ labels: { job: string }; health: string; lastError: string }> }>('targets');
  t.same(targets.activeTargets.map((a) => [a.labels.job, a.health, a.lastError]).sort(), [
    ['gate402-facilitator', 'up', ''],
    ['gate402-gateway', 'up', ''],
  ]);
});

t.test('paid requests through both parts, then every panel query is valid PromQL and the core panels have data', async (t) => {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const buyer = wrapFetchWithPayment(
    fetch,
    registerExactEvmScheme(
      x402Client.fromConfig({ schemes: [], spendControls: false, paymentRequirementsSelector: (_v, offers) => offers.find((o) => o.network === CAIP2.base) ?? (offers[0] as (typeof offers)[number]) }),
      { signer: payer },
    ),
  );
  for (let i = 0; i < PAID; i++) {
    const res = await buyer(`${gw.url}/m/catjoke/joke?lang=en`);
    t.equal(res.status, 200, await res.text());
  }
  const client = new HTTPFacilitatorClient({ url: fac.url });
  const req = requirementsFor(CAIP2.base, base, freshAccount().address, '10000');
  const payment = await officialPayment(payer, req);
  t.equal((await client.verify(payment, req)).isValid, true);
  const settled = await client.settle(payment, req);
  t.equal(settled.success, true, JSON.stringify(settled));

  // Prometheus has the settlements once it scraped both parts after them.
  await until(async () => values(await prometheus.query('sum(gate402_settlement_duration_seconds_count{outcome="settled"})'))[0] === PAID + 1, 'the settlements scraped', 30_000);
  t.equal(values(await prometheus.query('sum(gate402_settlement_duration_seconds_count{job="gate402-gateway", outcome="settled"})'))[0], PAID);
  t.equal(values(await prometheus.query('sum(gate402_settlement_duration_seconds_count{job="gate402-facilitator", outcome="settled"})'))[0], 1);

  const failures: string[] = [];
  const withData = new Map<string, number[]>();
  for (const q of panelQueries) {
    const expr = grafanaVariables(q.expr);
    t.notMatch(expr, /\$/, `${q.title}: no variable left`);
    try {
      const data = values(await prometheus.query(expr)).filter(Number.isFinite);
      if (data.length > 0) withData.set(`${q.dashboard} / ${q.title}`, [...(withData.get(`${q.dashboard} / ${q.title}`) ?? []), ...data]);
    } catch (err) {
      failures.push(`${q.dashboard} / ${q.title}: ${(err as Error).message}`);
    }
  }
  t.same(failures, [], `all ${panelQueries.length} panel queries evaluate`);
  t.comment(`${withData.size} of ${new Set(panelQueries.map((q) => `${q.dashboard} / ${q.title}`)).size} panels have data after the run`);
  const core: Array<[panel: string, check: (v: number[]) => boolean, what: string]> = [
    ['overview.json / Requests / s', (v) => v.every((x) => x > 0), 'requests per second'],
    ['overview.json / Requests by route and status', (v) => v.some((x) => x > 0), 'requests by route'],
    ['overview.json / Settlements by outcome', (v) => v.some((x) => x > 0), 'payments'],
    ['overview.json / Revenue in range', (v) => v.every((x) => x > 0), 'revenue'],
    ['settlement-engine.json / Settled / s', (v) => v.every((x) => x > 0), 'payments settled per second'],
    ['settlement-engine.json / Settlement p99', (v) => v.every((x) => x > 0), 'settlement latency'],
    ['settlement-engine.json / End-to-end settlement latency (settled)', (v) => v.some((x) => x > 0), 'settlement latency per network'],
    ['settlement-engine.json / Relayer gas balance', (v) => v.some((x) => x > 1), 'relayer gas (10 ether each) and the minimum'],
    ['settlement-engine.json / Payments pending', (v) => v.length > 0 && v.every((x) => x >= 0), 'pending payments'],
  ];
  for (const [panel, check, what] of core) {
    const v = withData.get(panel);
    t.ok(v !== undefined && check(v), `${panel}: ${what} (${JSON.stringify(v)})`);
  }

  // Every payment transition the run made was a series before it: initialisation left none out.
  const after = await scrape(`${gw.url}/metrics`);
  const grown = [...series(after, 'gate402_actor_transitions_total', { machine: 'payment' })].filter((s) => !series(freshGateway, 'gate402_actor_transitions_total', { machine: 'payment' }).has(s));
  t.same(grown, [], 'no payment transition series appeared that the fresh start did not have');
  t.equal(metricValue(after, 'gate402_actor_transitions_total', { machine: 'payment', from: 'inFlight.confirming', to: 'settled' }), PAID);
});

// --- Alerts that fire ------------------------------------------------------------------------------------------------

interface Alert {
  labels: Record<string, string>;
  state: string;
}
const firing = async (name: string): Promise<Alert[]> => (await prometheus.api<{ alerts: Alert[] }>('alerts')).alerts.filter((a) => a.labels.alertname === name && a.state === 'firing');

t.test('the shipped rules are loaded, and none fires while all is well', async (t) => {
  const groups = await prometheus.api<{ groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }> }>('rules');
  const loaded = groups.groups.flatMap((g) => g.rules);
  t.same(
    loaded.map((r) => r.name),
    alertNames(shipped),
  );
  t.same(
    loaded.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.health} ${r.lastError ?? ''}`),
    [],
    'every rule evaluates',
  );
  t.same(
    (await prometheus.api<{ alerts: Alert[] }>('alerts')).alerts.filter((a) => a.state === 'firing'),
    [],
    'no alert firing',
  );
});

t.test('a relayer drained of gas: the gas alerts fire for it, and only for it', async (t) => {
  const [drained, kept] = paid.relayers as [`0x${string}`, `0x${string}`];
  // Below GATE402_RELAYER_MIN_BALANCE_GWEI (0.001 ether): this relayer takes no new settlements.
  await rpcCall(base.rpcUrl, 'anvil_setBalance', [drained, toHex(parseEther('0.0005'))]);
  await until(async () => (await firing('Gate402RelayerOutOfGas')).length > 0, 'Gate402RelayerOutOfGas firing', 30_000);
  for (const name of ['Gate402RelayerOutOfGas', 'Gate402RelayerGasLow']) {
    await until(async () => (await firing(name)).length > 0, `${name} firing`, 30_000);
    const alerts = await firing(name);
    t.same(
      alerts.map((a) => [a.labels.job, a.labels.network, a.labels.relayer]),
      [['gate402-gateway', CAIP2.base, drained]],
      `${name}: the drained relayer only`,
    );
  }
  t.notOk(
    (await firing('Gate402RelayerGasLow')).some((a) => a.labels.relayer === kept),
    'the other relayer has gas',
  );
  // The ALERTS series as Alertmanager and Grafana see it.
  t.same(values(await prometheus.query(`ALERTS{alertname="Gate402RelayerOutOfGas", alertstate="firing", relayer="${drained}"}`)), [1]);
});

t.test('a part that stops answering: Gate402Down fires for it', async (t) => {
  await fac.stop();
  await until(async () => (await firing('Gate402Down')).length > 0, 'Gate402Down firing', 30_000);
  t.same(
    (await firing('Gate402Down')).map((a) => a.labels.job),
    ['gate402-facilitator'],
  );
  t.comment(`this file: ${((Date.now() - started) / 1000).toFixed(1)} s`);
});
