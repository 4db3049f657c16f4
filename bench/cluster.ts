/**
 * `npm run bench -- cluster`: what a cluster costs per paid request. One `gate402 gateway` on LMDB, then two on one
 * embedded PostgreSQL (requests alternating between them), each run with the same buyers, concurrency and upstream
 * on eip155:8453 with a block per transaction. The figure is CPU seconds (user + system, read from /proc/<pid>/stat
 * before and after the run) per paid request: of the gateway processes, and for the cluster also of PostgreSQL (its
 * postmaster's children that lived through the run). Goal: the cluster at most 1.2× LMDB per paid request.
 *
 *   node --import tsx bench/cluster.ts [--seconds N] [--concurrency N] [--payments N | --payment-rate N] [--poll-ms N]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseUnits } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { DEVNET_ROLES, devnetPrivateKey } from '../src/devnet/accounts.ts';
import { startEmbeddedPostgres } from '../src/store/postgres/embedded-server.ts';
import { tempDir } from '../test/helpers/temp-dir.ts';
import { benchDevnet, fundBuyers, networkOf, setBlockTime } from './devnet.ts';
import { load, startChild, stopChild } from './load.ts';
import { benchOptions } from './options.ts';
import { paidRunOptions, warmUp } from './paid-run.ts';
import { progress, writeFigures } from './report.ts';
import { SigningPool } from './sign.ts';
import { offerOf, ROUTE, upstreamServer } from './stacks.ts';

const opts = benchOptions({
  full: { seconds: '10', concurrency: '50', payments: '0', 'payment-rate': '200', 'poll-ms': '20' },
  quick: { seconds: '3', concurrency: '10', payments: '0', 'payment-rate': '100', 'poll-ms': '20' },
  tiny: { seconds: '1', concurrency: '2', payments: '6', 'payment-rate': '0', 'poll-ms': '20' },
});
const { seconds: SECONDS, pollMs: POLL_MS, paymentsFor } = paidRunOptions(opts);
const CONCURRENCY = opts.number('concurrency');
const CAIP = CAIP2.base;
const TICKS_PER_SECOND = 100; // Linux's USER_HZ

/** User + system CPU seconds of a process so far, from /proc/<pid>/stat (0 once it is gone). */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** The postmaster of a data directory and its children (backends, writers), by pid. */
function postgresPids(dataDir: string): number[] {
  const postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children = readdirSync('/proc').flatMap((name) => {
    if (!/^\d+$/.test(name)) return [];
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster ? [Number(name)] : [];
    } catch {
      return [];
    }
  });
  return [postmaster, ...children];
}

interface Node {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

async function gateway(manifestPath: string, upstream: string, relayers: number[], env: Record<string, string>): Promise<Node> {
  const child = await startChild(
    [resolve('src/cli/bin.mjs'), 'gateway', '--manifest', manifestPath],
    {
      GATE402_GATEWAY_PORT: '0',
      GATE402_DATA_DIR: tempDir('bench-cluster'),
      GATE402_RECEIPT_POLL_MS: String(POLL_MS),
      GATE402_CATALOG_UPSTREAM_BASE: upstream,
      GATE402_RELAYER_KEYS: relayers.map((i) => devnetPrivateKey(DEVNET_ROLES.relayers[i] as number)).join(','),
      GATE402_STOCK_ENABLED: 'false',
      ...env,
    },
    (output) => /^gateway: +(http:\/\/[^\s]+)/m.exec(output)?.[1],
  );
  return { url: `${child.found}${ROUTE}`, pid: child.child.pid as number, stop: () => stopChild(child.child) };
}

interface ClusterFigures {
  paidPerSecond: number;
  paid: number;
  p50ms: number;
  p99ms: number;
  outcomes: Record<string, number>;
  /** CPU seconds per paid request: the gateway processes, and PostgreSQL where there is one. */
  cpuMsPerPaid: { gateways: number; postgres: number; total: number };
}

async function measure(nodes: Node[], extraPids: () => number[], signer: SigningPool, buyers: Awaited<ReturnType<typeof fundBuyers>>): Promise<ClusterFigures> {
  const offer = await offerOf(nodes[0]?.url as string, CAIP);
  for (const node of nodes) await warmUp(signer, { server: { url: node.url, processes: {}, stop: async () => {} }, offer }, buyers, Math.min(CONCURRENCY, 8));
  const headers = await signer.sign(buyers, offer, paymentsFor(CONCURRENCY));
  const extra = extraPids();
  const before = { gateways: nodes.map((n) => cpuSeconds(n.pid)), extra: extra.map(cpuSeconds) };
  // One load per node (a load goes to one origin), the connections and payments shared out between them.
  const runs = await Promise.all(
    nodes.map((node, k) => {
      const mine = headers.filter((_, i) => i % nodes.length === k);
      return load((i) => (i < mine.length ? { url: node.url, headers: { 'payment-signature': mine[i] as string } } : undefined), SECONDS, Math.max(1, Math.round(CONCURRENCY / nodes.length)));
    }),
  );
  const outcomes: Record<string, number> = {};
  for (const r of runs) for (const [k, v] of Object.entries(r.outcomes)) outcomes[k] = (outcomes[k] ?? 0) + v;
  // Latencies of the slower node: the cluster's p99 is no better than its worst node's.
  const run = { seconds: Math.max(...runs.map((r) => r.seconds)), outcomes, p50ms: Math.max(...runs.map((r) => r.p50ms)), p99ms: Math.max(...runs.map((r) => r.p99ms)) };
  const gatewaysCpu = nodes.reduce((sum, n, i) => sum + cpuSeconds(n.pid) - (before.gateways[i] ?? 0), 0);
  const extraCpu = extra.reduce((sum, pid, i) => sum + Math.max(0, cpuSeconds(pid) - (before.extra[i] ?? 0)), 0);
  const paid = run.outcomes['200'] ?? 0;
  const per = (s: number) => (paid > 0 ? Number(((s * 1000) / paid).toFixed(3)) : 0);
  return {
    paidPerSecond: run.seconds > 0 ? Math.round(paid / run.seconds) : 0,
    paid,
    p50ms: run.p50ms,
    p99ms: run.p99ms,
    outcomes: run.outcomes,
    cpuMsPerPaid: { gateways: per(gatewaysCpu), postgres: per(extraCpu), total: per(gatewaysCpu + extraCpu) },
  };
}

const devnet = await benchDevnet(opts.manifest);
const n = networkOf(devnet.manifest, CAIP);
const signer = new SigningPool();
const stops: Array<() => Promise<void>> = [];
try {
  await setBlockTime(n, 0);
  const upstream = await upstreamServer();
  stops.push(() => upstream.stop());
  const buyers = await fundBuyers(n, CONCURRENCY, parseUnits('1000', 6));
  progress(`${buyers.length} buyers funded`);

  const alone = await gateway(devnet.manifestPath, upstream.url, [0, 1, 2, 3], {});
  const lmdb = await measure([alone], () => [], signer, buyers);
  await alone.stop();
  progress(`LMDB, one node: ${lmdb.paidPerSecond} paid/s, p99 ${lmdb.p99ms} ms, ${lmdb.cpuMsPerPaid.total} ms CPU per paid`);

  const pgDir = tempDir('bench-cluster-pg');
  const postgres = await startEmbeddedPostgres({ dir: pgDir, settings: { max_connections: '100' } });
  stops.push(() => postgres.stop());
  const url = await postgres.createDatabase('gate402');
  const nodes: Node[] = [];
  for (const [i, relayers] of [
    [0, 1],
    [2, 3],
  ].entries()) {
    const node = await gateway(devnet.manifestPath, upstream.url, relayers, { GATE402_STORE_URL: url, GATE402_NODE_ID: `bench-${i + 1}` });
    nodes.push(node);
    stops.push(() => node.stop());
  }
  const cluster = await measure(nodes, () => postgresPids(postgres.dataDir), signer, buyers);
  progress(`PostgreSQL, two nodes: ${cluster.paidPerSecond} paid/s, p99 ${cluster.p99ms} ms, ${cluster.cpuMsPerPaid.total} ms CPU per paid (${cluster.cpuMsPerPaid.postgres} of it PostgreSQL)`);
  const ratio = lmdb.cpuMsPerPaid.total > 0 ? Number((cluster.cpuMsPerPaid.total / lmdb.cpuMsPerPaid.total).toFixed(2)) : 0;
  writeFigures(opts.out, {
    cluster: { network: CAIP, route: `GET ${ROUTE}`, concurrency: CONCURRENCY, seconds: SECONDS, lmdb, postgres: cluster, cpuPerPaidClusterVsLmdb: ratio },
  });
} finally {
  for (const stop of stops.reverse()) await stop().catch(() => {});
  await signer.close();
  await devnet.stop();
}
