/**
 * `npm run bench -- cluster`: what a cluster costs per paid request, told apart from what two nodes cost. Three runs
 * on eip155:8453 (a block per transaction unless --block-time says otherwise), each open loop at the same fixed
 * arrival rate per node, every request with a payment of its own, one fixture upstream:
 * - one `gate402 gateway` on LMDB, relayers 0-3: the baseline;
 * - two gateways, each on an LMDB store of its own, relayers 0-1 and 2-3: the control (two nodes, no PostgreSQL);
 * - two gateways on one embedded PostgreSQL, relayers 0-1 and 2-3: the cluster.
 * The figure is CPU seconds (user + system, from /proc) per request answered 200, from just before a run's first
 * request to 1 s after its last answer (so what a node spends between requests counts too): of the gateway processes
 * and their descendants, and for the cluster also of PostgreSQL, its postmaster's whole process tree read at the end
 * (live processes, and through the postmaster's cutime/cstime those that exited during the run). Goal: the cluster
 * at most 1.2× the two LMDB gateways per paid request. The open loop comes from one address standing for many
 * buyers, so the per-client share of the settlement queue (GATE402_SETTLE_CLIENT_SHARE) is lifted; the queue's other
 * bounds still shed (503, counted apart: a run that sheds was offered more than it could take).
 *
 *   node --import tsx bench/cluster.ts [--seconds N] [--node-rate N] [--buyers N] [--block-time S] [--poll-ms N]
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { parseUnits, type Address } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { DEVNET_ROLES, devnetPrivateKey } from '../src/devnet/accounts.ts';
import { startEmbeddedPostgres } from '../src/store/postgres/embedded-server.ts';
import { tempDir } from '../test/helpers/temp-dir.ts';
import { processCpuSeconds } from './cpu.ts';
import { benchDevnet, blockNumber, fundBuyers, networkOf, setBlockTime, settledOnChain, type Buyer } from './devnet.ts';
import { startChild, stopChild, type LoadRequest } from './load.ts';
import { openLoop } from './open-loop.ts';
import { benchOptions } from './options.ts';
import { warmUp, type PaidTarget } from './paid-run.ts';
import { progress, writeFigures } from './report.ts';
import { SigningPool } from './sign.ts';
import { offerOf, ROUTE, upstreamServer } from './stacks.ts';

const opts = benchOptions({
  full: { seconds: '10', 'node-rate': '30', buyers: '50', 'block-time': '0', 'poll-ms': '20', 'pg-statements': '0' },
  quick: { seconds: '3', 'node-rate': '8', buyers: '10', 'block-time': '0', 'poll-ms': '20', 'pg-statements': '0' },
  tiny: { seconds: '1', 'node-rate': '3', buyers: '2', 'block-time': '0', 'poll-ms': '20', 'pg-statements': '0' },
});
const SECONDS = opts.number('seconds', { fraction: true, min: 0.1 });
const NODE_RATE = opts.number('node-rate', { fraction: true, min: 0.1 });
const BUYERS = opts.number('buyers');
const BLOCK_TIME = opts.number('block-time', { min: 0 });
const POLL_MS = opts.number('poll-ms', { min: 10 });
/** 1: PostgreSQL counts every statement (pg_stat_statements, which costs it some CPU), listed per paid request. */
const PG_STATEMENTS = opts.number('pg-statements', { min: 0 }) === 1;
const CAIP = CAIP2.base;
/** After a run's last answer, how long its processes are still measured: writes and timers that follow the answers. */
const TAIL_MS = 1000;

/** The postmaster of a data directory (PostgreSQL's first process; every other one descends from it). */
function postmasterOf(dataDir: string): number {
  return Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
}

interface Node {
  url: string;
  /** The node's own origin (its /metrics). */
  origin: string;
  pid: number;
  stop(): Promise<void>;
}

async function gateway(manifestPath: string, upstream: string, relayers: number[], env: Record<string, string> = {}): Promise<Node> {
  const child = await startChild(
    [resolve('src/cli/bin.mjs'), 'gateway', '--manifest', manifestPath],
    {
      GATE402_GATEWAY_PORT: '0',
      GATE402_DATA_DIR: tempDir('bench-cluster'),
      GATE402_RECEIPT_POLL_MS: String(POLL_MS),
      GATE402_CATALOG_UPSTREAM_BASE: upstream,
      GATE402_RELAYER_KEYS: relayers.map((i) => devnetPrivateKey(DEVNET_ROLES.relayers[i] as number)).join(','),
      GATE402_STOCK_ENABLED: 'false',
      // The load comes from one address standing for many buyers: its share of the settlement queue is not the bound here.
      GATE402_SETTLE_CLIENT_SHARE: '1000000',
      ...env,
    },
    (output) => /^gateway: +(http:\/\/[^\s]+)/m.exec(output)?.[1],
  );
  return { url: `${child.found}${ROUTE}`, origin: child.found, pid: child.child.pid as number, stop: () => stopChild(child.child) };
}

export interface ClusterRun {
  nodes: number;
  /** Requests offered (all nodes together) and over how many seconds. */
  offeredPerSecond: number;
  sent: number;
  seconds: number;
  /** Requests answered 200, per second of the run, and the payments to the payee mined meanwhile. */
  paid: number;
  paidPerSecond: number;
  settledOnChain: number;
  /** From when a request was due to its answer; of the slower node where there are two. */
  p50ms: number;
  p99ms: number;
  outcomes: Record<string, number>;
  /** CPU seconds over the run, and CPU milliseconds per request answered 200: the gateways, PostgreSQL (0 without), both. */
  cpuSeconds: { gateways: number; postgres: number; total: number };
  cpuMsPerPaid: { gateways: number; postgres: number; total: number };
  /** JSON-RPC calls the gateways made (their `gate402_rpc_request_duration_seconds_count`), per request answered 200: all, and by method. */
  rpcPerPaid: { total: number; byMethod: Record<string, number> };
  /** PostgreSQL only: write transactions committed (transaction ids drawn) per request answered 200, and with `--pg-statements 1` the statements. */
  perPaid?: { writeCommits: number; statements?: number; byStatement?: Array<{ calls: number; perPaid: number; query: string }> };
}

/** JSON-RPC calls a node has made so far, by method (from its /metrics, served openly on the devnet). */
async function rpcCalls(node: Node): Promise<Map<string, number>> {
  const text = await (await fetch(`${node.origin}/metrics`)).text();
  const calls = new Map<string, number>();
  for (const m of text.matchAll(/^gate402_rpc_request_duration_seconds_count\{([^}]*)\} (\S+)$/gm)) {
    const method = /method="([^"]*)"/.exec(m[1] ?? '')?.[1] ?? '?';
    calls.set(method, (calls.get(method) ?? 0) + Number(m[2]));
  }
  return calls;
}

/** What PostgreSQL did during a run: write transactions (ids drawn) and, counted, the statements it ran. */
async function databaseWork(db: pg.Client): Promise<{ xid: number; statements: Array<{ calls: number; query: string }> }> {
  const xid = Number((await db.query<{ x: string }>('SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS x')).rows[0]?.x ?? 0);
  if (!PG_STATEMENTS) return { xid, statements: [] };
  const { rows } = await db.query<{ calls: string; query: string }>(
    "SELECT calls::text AS calls, regexp_replace(query, '\\s+', ' ', 'g') AS query FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_current_snapshot%'",
  );
  return { xid, statements: rows.map((r) => ({ calls: Number(r.calls), query: r.query })) };
}

async function measure(name: string, n: ReturnType<typeof networkOf>, nodes: Node[], postmaster: number | undefined, signer: SigningPool, buyers: Buyer[], db?: pg.Client): Promise<ClusterRun> {
  const targets: PaidTarget[] = await Promise.all(nodes.map(async (node) => ({ server: { url: node.url, processes: {}, stop: async () => {} }, offer: await offerOf(node.url, CAIP) })));
  for (const target of targets) await warmUp(signer, target, buyers, Math.min(buyers.length, 8));
  const count = Math.max(1, Math.round(NODE_RATE * SECONDS));
  // One node's payments at a time: the signing pool serves one batch at a time.
  const requests: LoadRequest[][] = [];
  for (const { server, offer } of targets) requests.push((await signer.sign(buyers, offer, count)).map((h) => ({ url: server.url, headers: { 'payment-signature': h } })));
  const fromBlock = (await blockNumber(n)) + 1n;
  const cpu = () => {
    const gateways = nodes.reduce((sum, node) => sum + (processCpuSeconds(node.pid) ?? 0), 0);
    // Walked at the moment of reading: the backends of connections opened during the run are in the tree (or, gone, in the postmaster's cutime/cstime).
    const postgres = postmaster === undefined ? 0 : (processCpuSeconds(postmaster) ?? 0);
    return { gateways, postgres };
  };
  if (db && PG_STATEMENTS) await db.query('SELECT pg_stat_statements_reset()');
  const workBefore = db ? await databaseWork(db) : undefined;
  const rpcBefore = await Promise.all(nodes.map(rpcCalls));
  const before = cpu();
  const runs = await Promise.all(requests.map((r) => openLoop(r, NODE_RATE, { timeoutMs: 30_000, maxConnections: 256 })));
  await new Promise((r) => setTimeout(r, TAIL_MS));
  const after = cpu();
  const rpcAfter = await Promise.all(nodes.map(rpcCalls));
  const workAfter = db ? await databaseWork(db) : undefined;
  const outcomes: Record<string, number> = {};
  for (const r of runs) for (const [k, v] of Object.entries(r.outcomes)) outcomes[k] = (outcomes[k] ?? 0) + v;
  const paid = outcomes['200'] ?? 0;
  const seconds = Math.max(...runs.map((r) => r.seconds));
  // Nodes on stores of their own may each have a payee of their own: each payee and price counted once.
  const toBlock = await blockNumber(n);
  const payees = new Map(targets.map(({ offer }) => [`${offer.payTo.toLowerCase()}:${offer.amount}`, offer]));
  let settled = 0;
  for (const offer of payees.values()) settled += (await settledOnChain(n, offer.payTo as Address, BigInt(offer.amount), fromBlock, toBlock)).payments;
  const round = (x: number, digits = 3) => Number(x.toFixed(digits));
  const used = { gateways: round(after.gateways - before.gateways), postgres: round(after.postgres - before.postgres) };
  const per = (s: number) => (paid > 0 ? round((s * 1000) / paid) : 0);
  const byMethod: Record<string, number> = {};
  rpcAfter.forEach((calls, i) => {
    for (const [method, count] of calls) byMethod[method] = (byMethod[method] ?? 0) + count - (rpcBefore[i]?.get(method) ?? 0);
  });
  const perPaidOf = (count: number) => (paid > 0 ? round(count / paid, 2) : 0);
  const run: ClusterRun = {
    nodes: nodes.length,
    offeredPerSecond: NODE_RATE * nodes.length,
    sent: runs.reduce((a, r) => a + r.sent, 0),
    seconds,
    paid,
    paidPerSecond: seconds > 0 ? Math.round(paid / seconds) : 0,
    settledOnChain: settled,
    p50ms: Math.max(...runs.map((r) => r.p50ms)),
    p99ms: Math.max(...runs.map((r) => r.p99ms)),
    outcomes,
    cpuSeconds: { ...used, total: round(used.gateways + used.postgres) },
    cpuMsPerPaid: { gateways: per(used.gateways), postgres: per(used.postgres), total: per(used.gateways + used.postgres) },
    rpcPerPaid: {
      total: perPaidOf(Object.values(byMethod).reduce((a, b) => a + b, 0)),
      byMethod: Object.fromEntries(
        Object.entries(byMethod)
          .filter(([, count]) => count > 0)
          .sort((a, b) => b[1] - a[1])
          .map(([method, count]) => [method, perPaidOf(count)]),
      ),
    },
  };
  if (workBefore && workAfter && paid > 0) {
    const statements = workAfter.statements.reduce((a, r) => a + r.calls, 0);
    run.perPaid = {
      writeCommits: round((workAfter.xid - workBefore.xid) / paid, 2),
      ...(PG_STATEMENTS
        ? {
            statements: round(statements / paid, 2),
            byStatement: workAfter.statements.sort((a, b) => b.calls - a.calls).map((r) => ({ calls: r.calls, perPaid: round(r.calls / paid, 2), query: r.query.slice(0, 160) })),
          }
        : {}),
    };
    progress(`${name}: per paid request ${run.perPaid.writeCommits} write commits${PG_STATEMENTS ? `, ${run.perPaid.statements} statements` : ''}`);
  }
  progress(
    `${name}: ${run.paid} of ${run.sent} paid (${run.paidPerSecond}/s), p99 ${run.p99ms} ms, ${run.cpuMsPerPaid.total} ms CPU per paid (${run.cpuMsPerPaid.postgres} of it PostgreSQL), ${run.rpcPerPaid.total} RPC calls per paid ${JSON.stringify(run.rpcPerPaid.byMethod)}`,
  );
  return run;
}

const devnet = await benchDevnet(opts.manifest);
const n = networkOf(devnet.manifest, CAIP);
const signer = new SigningPool();
const stops: Array<() => Promise<void>> = [];
try {
  await setBlockTime(n, BLOCK_TIME);
  const upstream = await upstreamServer();
  stops.push(() => upstream.stop());
  const buyers = await fundBuyers(n, BUYERS, parseUnits('1000', 6));
  progress(`${buyers.length} buyers funded`);

  const alone = await gateway(devnet.manifestPath, upstream.url, [0, 1, 2, 3]);
  stops.push(() => alone.stop());
  const lmdbOne = await measure('LMDB, one node', n, [alone], undefined, signer, buyers);
  await alone.stop();

  const pair = [await gateway(devnet.manifestPath, upstream.url, [0, 1]), await gateway(devnet.manifestPath, upstream.url, [2, 3])];
  for (const node of pair) stops.push(() => node.stop());
  const lmdbTwo = await measure('LMDB, two nodes', n, pair, undefined, signer, buyers);
  for (const node of pair) await node.stop();

  const postgres = await startEmbeddedPostgres({
    dir: tempDir('bench-cluster-pg'),
    settings: { max_connections: '100', ...(PG_STATEMENTS ? { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'all' } : {}) },
  });
  stops.push(() => postgres.stop());
  const url = await postgres.createDatabase('gate402');
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  stops.push(() => db.end());
  if (PG_STATEMENTS) await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  const nodes: Node[] = [];
  for (const [i, relayers] of [
    [0, 1],
    [2, 3],
  ].entries()) {
    const node = await gateway(devnet.manifestPath, upstream.url, relayers, { GATE402_STORE_URL: url, GATE402_NODE_ID: `bench-${i + 1}` });
    nodes.push(node);
    stops.push(() => node.stop());
  }
  const postgresTwo = await measure('PostgreSQL, two nodes', n, nodes, postmasterOf(postgres.dataDir), signer, buyers, db);
  const ratio = (a: number, b: number) => (b > 0 ? Number((a / b).toFixed(2)) : 0);
  const clusterVsTwoLmdb = ratio(postgresTwo.cpuMsPerPaid.total, lmdbTwo.cpuMsPerPaid.total);
  progress(
    `CPU per paid: one LMDB node ${lmdbOne.cpuMsPerPaid.total} ms, two ${lmdbTwo.cpuMsPerPaid.total} ms, two on PostgreSQL ${postgresTwo.cpuMsPerPaid.total} ms: ${clusterVsTwoLmdb}× the two LMDB nodes`,
  );
  writeFigures(opts.out, {
    cluster: {
      network: CAIP,
      route: `GET ${ROUTE}`,
      blockTime: BLOCK_TIME,
      nodeRatePerSecond: NODE_RATE,
      seconds: SECONDS,
      buyers: buyers.length,
      receiptPollMs: POLL_MS,
      lmdbOne,
      lmdbTwo,
      postgresTwo,
      cpuPerPaidClusterVsTwoLmdb: clusterVsTwoLmdb,
      cpuPerPaidTwoLmdbVsOneLmdb: ratio(lmdbTwo.cpuMsPerPaid.total, lmdbOne.cpuMsPerPaid.total),
      cpuPerPaidClusterVsOneLmdb: ratio(postgresTwo.cpuMsPerPaid.total, lmdbOne.cpuMsPerPaid.total),
    },
  });
} finally {
  await setBlockTime(n, 0).catch(() => {}); // a devnet given by --manifest goes back to a block per transaction
  for (const stop of stops.reverse()) await stop().catch(() => {});
  await signer.close();
  await devnet.stop();
}
