// After a real paid request on the devnet, the gateway's /metrics shows it; the facilitator's /metrics shows a /verify.
import t from 'tap';
import { x402Client } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { parseUnits } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { DEVNET_ROLES, devnetAccount, devnetPrivateKey } from '../src/devnet/accounts.ts';
import { startFixtureUpstreams } from '../src/devnet/fixtures/server.ts';
import { freshAccount, network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { fundedPayer, officialPayment, postJson, requirementsFor } from './helpers/payments.ts';
import { scrape, valueOf as metricValue, type Exposition } from './helpers/prometheus.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';

const manifest = testDevnet();
const funder = tester('metrics');
const relayers = [12, 13].map((slot) => DEVNET_ROLES.testers[slot] as number);
const relayerKeys = relayers.map((i) => devnetPrivateKey(i)).join(',');
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());
const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: TEST_MANIFEST_PATH,
  env: { GATE402_RELAYER_KEYS: relayerKeys, GATE402_CATALOG_UPSTREAM_BASE: new URL(fixtures.baseUrlFor('catjoke')).origin },
});
t.teardown(() => gw.stop());

const PAID_ROUTE = { server: 'gateway', route: '/m/:slug/*', method: 'GET' };
const count = (m: Exposition, name: string, labels: Record<string, string> = {}) => metricValue(m, name, labels) ?? 0;

t.test('a paid request moves the gateway counters and histograms', async (t) => {
  const before = await scrape(`${gw.url}/metrics`);
  const url = `${gw.url}/m/catjoke/joke?lang=en`;
  t.equal((await fetch(url)).status, 402, 'an unpaid request');

  const n = network(manifest, CAIP2.stockChain);
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6));
  const client = registerExactEvmScheme(
    x402Client.fromConfig({
      schemes: [],
      spendControls: false,
      paymentRequirementsSelector: (_v, offers) => offers.find((o) => o.network === CAIP2.stockChain) ?? (offers[0] as (typeof offers)[number]),
    }),
    { signer: payer },
  );
  const res = await wrapFetchWithPayment(fetch, client)(url);
  t.equal(res.status, 200, await res.text());

  // The payment's last steps (its final durable write, leaving the pending set) may land just after the answer.
  let after = await scrape(`${gw.url}/metrics`);
  const settledIn = (m: Exposition) =>
    count(m, 'gate402_actor_transitions_total', { machine: 'payment', from: 'inFlight.confirming', to: 'settled' }) -
    count(before, 'gate402_actor_transitions_total', { machine: 'payment', from: 'inFlight.confirming', to: 'settled' });
  for (
    let i = 0;
    i < 100 &&
    (settledIn(after) < 1 ||
      count(after, 'gate402_payments_pending') > 0 ||
      count(after, 'gate402_store_commit_duration_seconds_count') - count(before, 'gate402_store_commit_duration_seconds_count') < 4);
    i++
  ) {
    await new Promise((r) => setTimeout(r, 100));
    after = await scrape(`${gw.url}/metrics`);
  }
  const moved = (name: string, labels: Record<string, string> = {}) => count(after, name, labels) - count(before, name, labels);
  t.equal(moved('gate402_http_request_duration_seconds_count', { ...PAID_ROUTE, status: '402' }), 2, "two 402s under the route template (ours and the client's first try)");
  t.equal(moved('gate402_http_request_duration_seconds_count', { ...PAID_ROUTE, status: '200' }), 1, 'one 200');
  t.equal(moved('gate402_challenges_total', { protocol: 'x402' }), 2, 'x402 challenges');
  t.equal(moved('gate402_challenges_total', { protocol: 'mpp' }), 2, 'MPP challenges');
  t.equal(moved('gate402_settlement_duration_seconds_count', { network: CAIP2.stockChain, outcome: 'settled' }), 1, 'one settlement, settled');
  t.ok(moved('gate402_settlement_duration_seconds_sum', { outcome: 'settled' }) > 0, 'with its latency');
  t.equal(moved('gate402_verifications_total', { result: 'valid', reason: 'none' }), 1, 'one verification: checked and simulated');
  for (const [from, to] of [
    ['start', 'verifying'],
    ['verifying', 'claiming'],
    ['claiming', 'simulating'],
    ['simulating', 'broadcasting'],
    ['broadcasting', 'inFlight.confirming'],
    ['inFlight.confirming', 'settled'],
  ]) {
    t.equal(moved('gate402_actor_transitions_total', { machine: 'payment', from: from as string, to: to as string }), 1, `payment ${from} -> ${to}`);
  }
  t.equal(moved('gate402_actor_state_duration_seconds_count', { machine: 'payment', state: 'inFlight.confirming' }), 1, 'time in confirming observed');
  t.equal(count(after, 'gate402_payments_pending'), 0, 'nothing pending afterwards');
  t.ok(moved('gate402_rpc_request_duration_seconds_count', { chain: CAIP2.stockChain, method: 'eth_sendRawTransaction', outcome: 'ok' }) >= 1, 'the broadcast RPC call');
  t.ok(moved('gate402_rpc_request_duration_seconds_count', { chain: CAIP2.stockChain, method: 'eth_getTransactionReceipt' }) >= 1, 'receipt polls');
  t.ok(moved('gate402_store_commit_duration_seconds_count') >= 4, 'durable writes: the claim and the record at each step');
  t.equal(moved('gate402_upstream_request_duration_seconds_count', { merchant: 'catjoke', outcome: '2xx' }), 1, 'one upstream call');
  t.equal(Math.round(moved('gate402_revenue_usd_total', { merchant: 'catjoke', protocol: 'x402' }) * 1e6), 10_000, 'revenue: the route price, 0.01 USD');
  t.equal(count(after, 'gate402_upstream_circuit_state', { merchant: 'catjoke' }), 0, 'its circuit is closed');
  for (const i of relayers) {
    const relayer = devnetAccount(i).address;
    t.ok(count(after, 'gate402_relayer_balance_ether', { network: CAIP2.stockChain, relayer }) > 0, `relayer ${relayer} has gas`);
    t.equal(count(after, 'gate402_relayer_in_flight', { network: CAIP2.stockChain, relayer }), 0);
  }
  t.ok(metricValue(after, 'gate402_worker_pool_utilization', { pool: 'signatures' }) !== undefined);
  t.ok(metricValue(after, 'gate402_worker_pool_queue_depth', { pool: 'signatures' }) !== undefined);
  t.ok(count(after, 'gate402_process_resident_memory_bytes') > 0, 'default process metrics');
  const labelValues = after.samples.flatMap((s) => Object.values(s.labels));
  t.notOk(
    labelValues.some((v) => v.includes('/m/catjoke') || v.toLowerCase().includes(payer.address.toLowerCase())),
    'no raw path or payer address in any label',
  );
});

t.test('the facilitator has its own /metrics', async (t) => {
  // Same relayer keys, but this facilitator only verifies: it sends nothing that could race the gateway's nonces.
  const fac = await spawnFacilitator({ manifestPath: TEST_MANIFEST_PATH, env: { GATE402_RELAYER_KEYS: relayerKeys } });
  t.teardown(() => fac.stop());
  const n = network(manifest, CAIP2.base);
  const payer = await fundedPayer(n, CAIP2.base, funder, parseUnits('1', 6));
  const req = requirementsFor(CAIP2.base, n, freshAccount().address, '10000');
  const verified = await postJson(`${fac.url}/verify`, { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req });
  t.same(verified.json, { isValid: true, payer: payer.address });
  const m = await scrape(`${fac.url}/metrics`);
  t.equal(count(m, 'gate402_http_request_duration_seconds_count', { server: 'facilitator', route: '/verify', method: 'POST', status: '200' }), 1);
  t.equal(count(m, 'gate402_verifications_total', { result: 'valid' }), 1);
  t.ok(count(m, 'gate402_rpc_request_duration_seconds_count', { chain: CAIP2.base, method: 'eth_estimateGas', outcome: 'ok' }) >= 1, 'the simulation');
});
