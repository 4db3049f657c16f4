// The backpressure bound of test/serial/backpressure.serial.ts, on two `gate402 gateway` nodes over one embedded
// PostgreSQL: 1,000 buyers at once, half at each node, on 1-second blocks (chains of this file's own). Each answer is
// a 200 or a 503 that charged nothing; the 200s' p99 stays within its bound; the ledger adds up from the chain's logs.
import t from 'tap';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { Agent, request } from 'undici';
import { parseUnits, type Address, type Hex, type LocalAccount } from 'viem';
import { CAIP2 } from '../../src/chain/canonical.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { stablecoinArtifact } from '../../src/devnet/contracts/artifacts/index.ts';
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';
import type { Eip3009Payload, PaymentPayload, PaymentRequirements } from '../../src/protocol/x402/types.ts';
import { clientsFor, freshAccount, tester } from '../helpers/devnet.ts';
import { ledger } from '../helpers/ledger.ts';
import { type PaidGateway, spawnPaidGateway } from '../helpers/paid-gateway.ts';
import { fundedPayer, officialPayment, stableBalance } from '../helpers/payments.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { spawnOwnDevnet } from '../helpers/spawn-devnet.ts';

const BUYERS = 1000;
const PAYERS = 100;
// Base's block time (the buyers pay on eip155:8453). One node's storm runs on 1-second blocks; two nodes share the
// machine's 2 cores with PostgreSQL besides, and on 1-second blocks their 200s landed in the second block after the
// storm, leaving the answers after it less than a second within the bound: 2 of 16 runs beside two busy loops missed
// it by 0.1 to 0.2 s (below).
const BLOCK_SECONDS = 2;
// One node's bound (test/serial/backpressure.serial.ts), on two nodes over one database: two blocks and a second, so
// the 200s come in a batch's first blocks, not later.
const P99_BOUND_MS = (2 * BLOCK_SECONDS + 1) * 1000;

const devnet = await spawnOwnDevnet('backpressure-cluster');
t.teardown(() => devnet.stop());
const db = await startPostgres();
t.teardown(() => db.stop());
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());
const env = (id: string) => ({
  GATE402_STORE_URL: db.url,
  GATE402_NODE_ID: id,
  GATE402_LEASE_MS: '3000',
  GATE402_STORE_CONNECT_TIMEOUT_MS: '30000',
  GATE402_MAX_CONNECTIONS_PER_CLIENT: '2048',
  GATE402_RECEIPT_POLL_MS: '50',
  // The buyers' connections, opened before the storm, stay open through it.
  GATE402_CONNECTION_IDLE_MS: '120000',
});
const nodes: PaidGateway[] = [];
for (const id of ['bp1', 'bp2']) {
  const node = await spawnPaidGateway(devnet.manifest, new URL(fixtures.baseUrlFor('catjoke')).origin, env(id), { manifestPath: devnet.manifestPath });
  t.teardown(() => node.gw.stop());
  nodes.push(node);
}

const n = devnet.manifest.networks[CAIP2.base] as NetworkEntry;
const urlOf = (i: number) => `${(nodes[i % 2] as PaidGateway).gw.url}/m/catjoke/joke`;
const agent = new Agent({ connections: BUYERS + 16, pipelining: 1, headersTimeout: 60_000, bodyTimeout: 60_000 });
t.teardown(() => agent.close());

interface Answer {
  status: number;
  ms: number;
  retryAfter: string | undefined;
  body: string;
}

async function send(url: string, headers: Record<string, string>): Promise<Answer> {
  const started = performance.now();
  const res = await request(url, { dispatcher: agent, headers });
  const body = await res.body.text();
  const retry = res.headers['retry-after'];
  return { status: res.statusCode, ms: performance.now() - started, retryAfter: typeof retry === 'string' ? retry : undefined, body };
}

/** Per series of the node's /metrics whose name starts with one of `prefixes`: its value. */
async function scrape(origin: string, prefixes: string[]): Promise<Map<string, number>> {
  const text = await (await request(`${origin}/metrics`, { dispatcher: agent })).body.text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\S+)\s+(\S+)$/.exec(line);
    if (m && prefixes.some((p) => (m[1] as string).startsWith(p))) out.set(m[1] as string, Number(m[2]));
  }
  return out;
}
const BREAKDOWN = [
  'gate402_actor_state_duration_seconds_sum',
  'gate402_actor_state_duration_seconds_count',
  'gate402_store_commit_duration_seconds_sum',
  'gate402_store_commit_duration_seconds_count',
  'gate402_store_commit_duration_seconds_bucket',
  'gate402_settlement_duration_seconds_sum',
  'gate402_settlement_duration_seconds_count',
  'gate402_upstream_request_duration_seconds_sum',
  'gate402_upstream_request_duration_seconds_count',
  'gate402_rpc_request_duration_seconds_sum',
  'gate402_rpc_request_duration_seconds_count',
];
/** Where the storm's time went at a node: RPC calls (count, mean ms) by method, mean ms per payment-actor state, and PostgreSQL commits (count, mean, share over 100 ms). */
function breakdown(before: Map<string, number>, after: Map<string, number>): string {
  const delta = (k: string) => (after.get(k) ?? 0) - (before.get(k) ?? 0);
  const states: string[] = [];
  for (const k of after.keys()) {
    const m = /^gate402_actor_state_duration_seconds_sum\{machine="payment",state="([^"]+)"\}$/.exec(k);
    if (!m) continue;
    const count = delta(k.replace('_sum', '_count'));
    if (count > 0) states.push(`${m[1]} ${((delta(k) / count) * 1000).toFixed(0)} ms x${count}`);
  }
  const commits = delta('gate402_store_commit_duration_seconds_count{store="postgres"}');
  const slow = commits - delta('gate402_store_commit_duration_seconds_bucket{le="0.1",store="postgres"}');
  const mean = commits > 0 ? (delta('gate402_store_commit_duration_seconds_sum{store="postgres"}') / commits) * 1000 : 0;
  const sum = (prefix: string) => [...after.keys()].filter((k) => k.startsWith(prefix)).reduce((a, k) => a + delta(k), 0);
  const meanOf = (name: string) => `${((sum(`${name}_sum`) / Math.max(1, sum(`${name}_count`))) * 1000).toFixed(0)} ms x${sum(`${name}_count`)}`;
  const rpc: string[] = [];
  for (const k of after.keys()) {
    const m = /^gate402_rpc_request_duration_seconds_count\{.*method="([^"]+)".*\}$/.exec(k);
    if (m && delta(k) > 0) rpc.push(`${m[1]} x${delta(k)} ${((delta(k.replace('_count', '_sum')) / delta(k)) * 1000).toFixed(0)} ms`);
  }
  return `rpc: ${rpc.join(', ')}; settlements ${meanOf('gate402_settlement_duration_seconds')}, upstream ${meanOf('gate402_upstream_request_duration_seconds')}; states: ${states.join(', ')}; postgres commits ${commits}, mean ${mean.toFixed(1)} ms, ${slow} over 100 ms`;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;

async function authorizationUsed(payer: Address, nonce: Hex): Promise<boolean> {
  const { pub } = clientsFor(n, freshAccount());
  return pub.readContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'authorizationState', args: [payer, nonce] }) as Promise<boolean>;
}

t.test(`${BUYERS} buyers at once at two nodes over one PostgreSQL, on ${BLOCK_SECONDS}-second blocks: each answer a 200 or a 503 that charged nothing`, async (t) => {
  const first = await request(urlOf(0), { dispatcher: agent });
  const offer = decodePaymentRequiredHeader(first.headers['payment-required'] as string).accepts.find((o) => o.network === CAIP2.base) as PaymentRequirements | undefined;
  await first.body.text();
  if (!offer) throw new Error('no eip155:8453 offer');
  const price = BigInt(offer.amount);
  const merchant = offer.payTo as Address;

  const funder = tester('clusterFaults');
  const payers: LocalAccount[] = [];
  for (let i = 0; i < PAYERS; i++) payers.push(await fundedPayer(n, CAIP2.base, funder, parseUnits('1', 6)));
  const payments: Array<{ payer: Address; nonce: Hex; headers: Record<string, string> }> = [];
  for (let i = 0; i < BUYERS; i++) {
    const payer = payers[i % PAYERS] as LocalAccount;
    const payload: PaymentPayload = await officialPayment(payer, offer);
    const nonce = (payload.payload as Eip3009Payload).authorization.nonce;
    payments.push({ payer: payer.address, nonce, headers: { 'payment-signature': encodePaymentSignatureHeader(payload as Parameters<typeof encodePaymentSignatureHeader>[0]) } });
  }
  // Nodes that have been running: one payment served at each, and the buyers' connections open.
  for (const i of [0, 1]) {
    const warm = await officialPayment(payers[i] as LocalAccount, offer);
    t.equal(
      (await send(urlOf(i), { 'payment-signature': encodePaymentSignatureHeader(warm as Parameters<typeof encodePaymentSignatureHeader>[0]) })).status,
      200,
      `a first payment is served at node ${i + 1}`,
    );
  }
  await Promise.all(payments.map((_, i) => send(urlOf(i), {})));
  const fromBlock = BigInt(await rpcCall<string>(n.rpcUrl, 'eth_blockNumber', [])) + 1n;
  const callsBefore = fixtures.calls;

  await rpcCall(n.rpcUrl, 'evm_setIntervalMining', [BLOCK_SECONDS]);
  t.teardown(async () => {
    await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);
  });

  const metricsBefore = await Promise.all(nodes.map((node) => scrape(node.gw.url, BREAKDOWN)));
  const unpaidDuring = Promise.all(Array.from({ length: 20 }, (_, i) => send(urlOf(i), {})));
  const answers = await Promise.all(payments.map((p, i) => send(urlOf(i), p.headers)));
  const unpaidAnswers = await unpaidDuring;

  const byStatus = new Map<number, number>();
  for (const a of answers) byStatus.set(a.status, (byStatus.get(a.status) ?? 0) + 1);
  const served = answers.filter((a) => a.status === 200);
  const shed = answers.filter((a) => a.status === 503);
  const latencies = served.map((a) => a.ms).sort((a, b) => a - b);
  const p99 = percentile(latencies, 99);
  const perNode = [0, 1].map((k) => answers.filter((a, i) => i % 2 === k && a.status === 200).length);
  t.comment(`answers: ${JSON.stringify(Object.fromEntries(byStatus))} (200s per node ${perNode.join(', ')}); 200s p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${p99.toFixed(0)} ms`);
  const metricsAfter = await Promise.all(nodes.map((node) => scrape(node.gw.url, BREAKDOWN)));
  for (const i of [0, 1]) t.comment(`node ${i + 1}: ${breakdown(metricsBefore[i] as Map<string, number>, metricsAfter[i] as Map<string, number>)}`);
  t.comment(`reasons of the first 503s: ${JSON.stringify(shed.slice(0, 2).map((a) => a.body))}; others: ${JSON.stringify(answers.filter((a) => a.status !== 200 && a.status !== 503).slice(0, 2))}`);

  t.equal(served.length + shed.length, BUYERS, 'every answer is a 200 or a 503 (no 202, no 402, no 5xx else)');
  // Each node takes in what its queue's wait bound lets through; the 200s land together in one block. Their batches
  // used to be estimated (eth_estimateGas runs a batch several times to find its least gas): 0.4 to 0.9 s of the
  // storm's 1 s blocks on the busy anvil, so the 200s landed in the second block quiet (p99 1.2 to 2.3 s) and in the
  // third under load (p99 up to 3.4 s, TODO until 2026-11-29). A batch of calls already estimated on the network is
  // run once at the limit it is sent with (settlement-batcher.ts): on 1-second blocks p99 1.3 s quiet (the first
  // block), beside two busy loops 2.3 to 2.6 s in 14 of 16 runs (the second block) and 3.1 and 3.2 s in two (the
  // answers after the block took over a second). On 2-second blocks, beside two busy loops: p99 2.25 to 2.68 s in 20
  // of 20 runs (the first block), each node serving 49 to 112.
  t.ok(
    perNode.every((c) => c >= 32),
    `each node serves at least a batch's worth (${perNode.join(', ')})`,
  );
  t.ok(shed.length > 0, `and the rest is turned away before charging (${shed.length})`);
  t.ok(p99 < P99_BOUND_MS, `p99 of the 200s (${p99.toFixed(0)} ms) is under ${P99_BOUND_MS} ms`);
  t.ok(
    shed.every((a) => Number(a.retryAfter) >= 1 && /nothing was charged/.test(a.body)),
    'each 503 says nothing was charged and when to come back (Retry-After)',
  );
  t.ok(
    unpaidAnswers.every((a) => a.status === 402),
    'unpaid requests got their 402 all along',
  );

  await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  const report = await ledger({
    n,
    merchant,
    fromBlock,
    price,
    purchases: payments.map((p, i) => ({ payer: p.payer, status: answers[i]?.status ?? 0 })),
    upstreamCalls: fixtures.calls - callsBefore,
  });
  t.same(report.faults, [], `the ledger adds up: ${report.served} served, ${report.transfers} transfers`);
  t.equal((await stableBalance(n, merchant)) > 0n, true, 'the merchant was paid');
  const shedPayments = payments.filter((_, i) => answers[i]?.status === 503);
  const used: boolean[] = [];
  for (let i = 0; i < shedPayments.length; i += 50) {
    used.push(...(await Promise.all(shedPayments.slice(i, i + 50).map((p) => authorizationUsed(p.payer, p.nonce)))));
  }
  t.equal(used.filter(Boolean).length, 0, 'no authorization of a 503 was used on chain');
});
