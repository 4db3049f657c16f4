// The cluster's faults, each closed by the ledger check (test/helpers/ledger.ts): two `gate402 gateway` nodes on one
// embedded PostgreSQL, paid by the official client on the shared devnet. The database restarted while paid requests
// are in flight at both nodes; one node's database connections cut while its settlements are signed and held; a node
// killed after the chain's receipt reached it and before it could write the payment settled; the database away for
// longer than a lease term, so that every node exits and its supervisor starts it again. Every 200 has exactly
// one transfer on chain, no payer is charged without an answer that served it, upstream calls equal served answers.
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import pg from 'pg';
import { parseUnits, type Address, type LocalAccount } from 'viem';
import { rpcCall } from '../src/chain/rpc.ts';
import { NodeSupervisor } from '../src/cluster/node-supervisor.ts';
import { type ClusterNode, startCluster, tcpPortsOf } from './helpers/cluster.ts';
import { tester } from './helpers/devnet.ts';
import { ledger, type Purchase, transfersTo } from './helpers/ledger.ts';
import { relayerTxCount, until, x402Credential } from './helpers/paid-gateway.ts';
import { fundedPayer } from './helpers/payments.ts';

// Four faults, each waiting out lease terms and retries on a loaded machine: more than the default file timeout.
t.setTimeout(600_000);
// A server of its own: the outages below stop and restart it.
const cluster = await startCluster(t, { ownServer: true });
const { n, caip2, db, fixtures } = cluster;
const joke = (node: ClusterNode) => `${node.gw.url}/m/catjoke/joke`;
const price = 10_000n; // catjoke's joke: $0.01
/** The built-in catjoke merchant's wallet on the stock chain, as `node` offers it. */
async function merchantAt(node: ClusterNode): Promise<Address> {
  const offer = decodePaymentRequiredHeader(String((await fetch(joke(node))).headers.get('payment-required'))).accepts.find((o) => o.network === caip2);
  return offer?.payTo as Address;
}
let merchant: Address;

/** A statement of the test's own, on a connection of its own (the database restarts under this file). */
async function admin<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<pg.QueryResult<R>> {
  const client = new pg.Client({ connectionString: db.url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    return await client.query<R>(text, values);
  } finally {
    await client.end().catch(() => {});
  }
}

const headBlock = async () => BigInt(await rpcCall<string>(n.rpcUrl, 'eth_blockNumber', []));
const payersFor = async (count: number) => {
  const payers: LocalAccount[] = [];
  for (let i = 0; i < count; i++) payers.push(await fundedPayer(n, caip2, tester('clusterFaults'), parseUnits('1', 6)));
  return payers;
};

interface Answer {
  status: number;
  text: string;
  retryAfter?: string | null;
}

/**
 * A buyer's request with its credential, asked again while the answer is pending (202) or another request holds its
 * turn (409), as a buyer would; with `patient`, a 503 or a lost connection is also asked again (until `timeoutMs`).
 */
async function buy(node: ClusterNode, credential: string, opts: { patient?: boolean; timeoutMs?: number } = {}): Promise<Answer> {
  const deadline = Date.now() + (opts.timeoutMs ?? 90_000);
  for (;;) {
    let answer: Answer;
    try {
      const res = await fetch(joke(node), { headers: { 'payment-signature': credential }, signal: AbortSignal.timeout(60_000) });
      answer = { status: res.status, text: await res.text(), retryAfter: res.headers.get('retry-after') };
    } catch (err) {
      answer = { status: 0, text: String(err) };
    }
    const again = answer.status === 202 || (answer.status === 409 && answer.text.includes('in_progress')) || (opts.patient && (answer.status === 503 || answer.status === 0));
    if (!again || Date.now() > deadline) return answer;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The lines of `node`'s log that say what failed (an error, a crash, a fence), for the test's output. */
function logged(node: ClusterNode, pattern = /"level":"(error|fatal)"|failed:|fenced|Error|stopping/): string[] {
  try {
    return readFileSync(node.gw.logPath, 'utf8')
      .split('\n')
      .filter((l) => pattern.test(l))
      .slice(-6)
      .map((l) => l.slice(0, 400));
  } catch {
    return [];
  }
}

/** Whether an answer tells the buyer that nothing was charged (it may then walk away). */
const saysNothingCharged = (a: Answer) => /nothing was charged|not charged|no charge/i.test(a.text);

/** Waits (wide bound) for the ledger to add up, as the nodes finish what they had in flight, and asserts it. */
async function ledgerHolds(t: Test, purchases: Purchase[], fromBlock: bigint, upstreamCalls: () => number) {
  let report = await ledger({ n, merchant, fromBlock, price, purchases, upstreamCalls: upstreamCalls() });
  const deadline = Date.now() + 30_000;
  while (!report.ok && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
    report = await ledger({ n, merchant, fromBlock, price, purchases, upstreamCalls: upstreamCalls() });
  }
  t.same(report.faults, [], `the ledger adds up: ${report.served} served, ${report.transfers} transfers, ${upstreamCalls()} upstream calls`);
  return report;
}

/** The PostgreSQL backends of `node`'s process (matched by their client ports), with what each is doing. */
async function backendsOf(node: ClusterNode): Promise<Array<{ pid: number; wait: string | null; query: string }>> {
  const pid = node.gw.child.pid;
  if (pid === undefined) return [];
  let ports: number[];
  try {
    ports = tcpPortsOf(pid);
  } catch {
    return [];
  }
  const rows = await admin<{ pid: number; wait: string | null; query: string }>(
    'SELECT pid, wait_event_type AS wait, query FROM pg_stat_activity WHERE datname = current_database() AND client_port = ANY($1::int[])',
    [ports],
  );
  return rows.rows;
}

t.test('PostgreSQL restarted while paid requests are in flight at both nodes: clear errors or service, both nodes serve again after, the ledger adds up', async (t) => {
  // A node that cannot renew its leases for most of a term stops (src/cli/compose-cluster.ts): the nodes here hold
  // 15-second terms, which a restart of the database (seconds, on a loaded machine) stays well inside.
  const long = { GATE402_LEASE_MS: '15000' };
  const a = await cluster.node('fr1', { env: long });
  const b = await cluster.node('fr2', { env: long });
  merchant = await merchantAt(a);
  const payers = await payersFor(10);
  const fromBlock = await headBlock();
  const callsBefore = fixtures.calls;
  const nodeOf = (i: number) => (i % 2 === 0 ? a : b);
  const credentials = await Promise.all(payers.map((p, i) => x402Credential(joke(nodeOf(i)), p, caip2)));
  const answers: Array<Answer | undefined> = payers.map(() => undefined);

  // Six buyers, three at each node; the database stops once the first of them is on chain.
  const inFlight = [0, 1, 2, 3, 4, 5].map(async (i) => {
    answers[i] = await buy(nodeOf(i), credentials[i] as string);
  });
  const firstEight = payers.slice(0, 6).map((p) => p.address);
  await until(async () => [...(await transfersTo(n, merchant, firstEight, fromBlock)).values()].some((v) => v.length > 0), 'a first payment on chain', 60_000);
  await db.server.stop();
  t.comment('PostgreSQL stopped');

  // Two more while it is down: one at each node.
  const during = await Promise.all([6, 7].map((i) => buy(nodeOf(i), credentials[i] as string)));
  during.forEach((answer, j) => {
    answers[6 + j] = answer;
  });
  t.comment(`answers while down: ${during.map((d) => `${d.status} ${d.text.slice(0, 300)}`).join(' | ')}`);
  for (const line of [...logged(a), ...logged(b)]) t.comment(line);
  for (const d of during) {
    t.ok(d.status === 200 || d.status === 503, `a request while the database is down is answered 503 (or served): ${d.status}`);
    if (d.status === 503) {
      t.doesNotThrow(() => JSON.parse(d.text), 'in JSON');
      t.ok(d.retryAfter !== null && Number(d.retryAfter) > 0, `with Retry-After (${d.retryAfter})`);
      t.notMatch(d.text, /\bat \S+ \(|node_modules/, 'without a stack trace');
    }
  }
  await db.server.restart();
  t.comment('PostgreSQL started again');
  await Promise.all(inFlight);
  t.comment(
    `answers of the six in flight: ${answers
      .slice(0, 6)
      .map((d) => `${d?.status} ${d?.text.slice(0, 300)}`)
      .join(' | ')}`,
  );
  // Or settled but not recorded while the database went away: a 502 naming its transaction and telling the buyer to
  // send the same credential again, which the final statuses and the ledger below hold to (served once, charged once).
  const redeemable = (d: Answer) => d.status === 502 && /"transaction":"0x[0-9a-f]{64}"/.test(d.text) && /same credential/.test(d.text);
  for (const d of answers.slice(0, 6)) {
    t.ok(d && ([200, 202, 503].includes(d.status) || redeemable(d)), `each in-flight request ends served, pending, turned away or redeemable: ${d?.status}`);
  }

  // Both nodes serve again, neither restarted: a new buyer at each (asking again while the pools reconnect).
  const after = await Promise.all([8, 9].map((i) => buy(nodeOf(i), credentials[i] as string, { patient: true, timeoutMs: 60_000 })));
  answers[8] = after[0];
  answers[9] = after[1];
  t.same(
    after.map((x) => x.status),
    [200, 200],
    `both nodes serve after the restart: ${after.map((x) => x.text.slice(0, 160)).join(' | ')}`,
  );
  t.equal(a.gw.child.exitCode, null, 'node 1 kept running');
  t.equal(b.gw.child.exitCode, null, 'node 2 kept running');

  // A turned-away buyer that was not told "nothing was charged" asks again, as told: it must be served, once.
  await Promise.all(
    answers.slice(0, 8).map(async (d, i) => {
      if (d && d.status !== 200 && !saysNothingCharged(d)) answers[i] = await buy(nodeOf(i), credentials[i] as string, { patient: true, timeoutMs: 30_000 });
    }),
  );
  const purchases = payers.map((p, i) => ({ payer: p.address, status: (answers[i] as Answer).status }));
  t.comment(`final statuses: ${purchases.map((p) => p.status).join(',')}`);
  t.same(
    purchases.filter((p) => p.status === 202),
    [],
    'no payment in flight across the restart is still pending after it',
  );
  await ledgerHolds(t, purchases, fromBlock, () => fixtures.calls - callsBefore);
  await Promise.all([a.gw.stop(), b.gw.stop()]);
});

// Nodes on 3-second leases, for the faults a survivor finishes: the first reaches the stock chain through a gate, to
// hold its sends (connections cut) and its receipts (kill).
let a: ClusterNode;
let b: ClusterNode;

t.test("one node's database connections cut while its settlements are signed: the ledger adds up, nothing doubled, and the node serves again or is fenced", async (t) => {
  a = await cluster.node('fa1', { gated: true });
  b = await cluster.node('fa2');
  merchant = await merchantAt(a);
  const gate = a.gate;
  if (!gate) throw new Error('node 1 is gated');
  const payers = await payersFor(4);
  const fromBlock = await headBlock();
  const callsBefore = fixtures.calls;
  const credentials = await Promise.all(payers.map((p) => x402Credential(joke(a), p, caip2)));
  gate.hold((call) => call.method === 'eth_sendRawTransaction');
  const pending = credentials.map((c) => buy(a, c));
  await until(() => gate.held > 0, 'node 1 to send a signed settlement', 60_000);
  const backends = await backendsOf(a);
  t.ok(backends.length > 0, `node 1 has ${backends.length} database connection(s)`);
  const cut = await admin<{ ok: boolean }>('SELECT pg_terminate_backend(pid) AS ok FROM unnest($1::int[]) AS pid', [backends.map((x) => x.pid)]);
  t.ok(
    cut.rows.every((r) => r.ok),
    `every one of them cut (${cut.rows.length})`,
  );
  gate.release();
  const answers = await Promise.all(pending);
  t.comment(`answers at node 1: ${answers.map((d) => `${d.status} ${d.text.slice(0, 200)}`).join(' | ')}`);
  t.comment(`node 1 ${a.gw.child.exitCode === null ? 'runs' : `exited ${a.gw.child.exitCode}`}; its log: ${logged(a).join(' || ')}`);
  // A buyer not told "nothing was charged" asks again, at the other node: node 1 recovered, or node 2 adopted its work.
  await Promise.all(
    answers.map(async (d, i) => {
      if (d.status !== 200 && !saysNothingCharged(d)) answers[i] = await buy(b, credentials[i] as string, { patient: true, timeoutMs: 60_000 });
    }),
  );
  await ledgerHolds(
    t,
    payers.map((p, i) => ({ payer: p.address, status: (answers[i] as Answer).status })),
    fromBlock,
    () => fixtures.calls - callsBefore,
  );
  // Node 1 serves a new payment with new connections, or said it was fenced and stopped (node 2 then holds its work).
  const fenced = logged(a, /fenced/).length > 0;
  if (a.gw.child.exitCode === null) {
    const next = (await payersFor(1))[0] as LocalAccount;
    const nextFrom = await headBlock();
    const nextCalls = fixtures.calls;
    const again = await buy(a, await x402Credential(joke(b), next, caip2), { patient: true, timeoutMs: 60_000 });
    t.ok(again.status === 200 || fenced, `node 1 serves again (${again.status}) or says it was fenced (${fenced})`);
    await ledgerHolds(t, [{ payer: next.address, status: again.status }], nextFrom, () => fixtures.calls - nextCalls);
  } else {
    t.ok(fenced, 'node 1 stopped, saying it was fenced');
    a = await cluster.node('fa3', { gated: true });
  }
});

t.test('a node killed after the receipt reached it and before it wrote the payment settled: the survivor reconciles it from the chain, served once, charged once', async (t) => {
  const gate = a.gate;
  if (!gate) throw new Error('node 1 is gated');
  const [payer] = await payersFor(1);
  if (!payer) throw new Error('no payer');
  const fromBlock = await headBlock();
  const callsBefore = fixtures.calls;
  const credential = await x402Credential(joke(a), payer, caip2);
  const aSent = await relayerTxCount(n, a.relayers);
  const bSent = await relayerTxCount(n, b.relayers);

  // When the chain's receipt of the payer's transfer is on its way to node 1, the test takes a lock that holds every
  // record and claim write (reads pass), then lets the receipt through: node 1's next write waits at the database.
  const locker = new pg.Client({ connectionString: db.url });
  locker.on('error', () => {});
  await locker.connect();
  t.teardown(() => locker.end().catch(() => {}));
  const topic = payer.address.slice(2).toLowerCase();
  let locked = false;
  gate.inspect(async (calls, answer) => {
    if (locked || !calls?.some((c) => c.method === 'eth_getTransactionReceipt' || c.method === 'eth_getBlockReceipts')) return;
    if (!answer.toLowerCase().includes(topic)) return;
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE records, claims IN SHARE MODE');
    locked = true;
  });
  const answered = buy(a, credential).catch((err: unknown) => ({ status: 0, text: String(err) }));
  let waiting: Array<{ pid: number; wait: string | null; query: string }> = [];
  await until(
    async () => {
      waiting = locked ? (await backendsOf(a)).filter((x) => x.wait === 'Lock') : [];
      return waiting.length > 0;
    },
    'node 1 to hold the receipt and wait to write',
    60_000,
  );
  t.comment(`node 1 waits to write: ${waiting.map((w) => w.query.replace(/\s+/g, ' ').slice(0, 200)).join(' | ')}`);
  t.equal((await transfersTo(n, merchant, [payer.address], fromBlock)).get(payer.address.toLowerCase())?.length, 1, 'the transfer is on chain');
  const all = await backendsOf(a);
  await a.gw.stop('SIGKILL');
  // A killed process's statement already at the database would still commit: its sessions end with it.
  await admin('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [all.map((x) => x.pid)]);
  await locker.query('ROLLBACK');
  gate.inspect(undefined);
  const first = await answered;
  t.not(first.status, 200, `the buyer at the killed node was not served there (${first.status})`);

  const served = await buy(b, credential, { patient: true, timeoutMs: 90_000 });
  t.equal(served.status, 200, `the survivor serves the payment: ${served.text.slice(0, 200)}`);
  t.equal(await buy(b, credential).then((x) => x.status), 402, 'once: the credential is spent after');
  await ledgerHolds(t, [{ payer: payer.address, status: served.status }], fromBlock, () => fixtures.calls - callsBefore);
  t.equal((await relayerTxCount(n, a.relayers)) - aSent, 1, "the killed node's one transaction");
  t.equal((await relayerTxCount(n, b.relayers)) - bSent, 0, 'the survivor signed nothing for it: it read the outcome from the chain');
});

t.test('PostgreSQL away for four lease terms: every node fences itself by exiting, its supervisor starts it again, and the cluster serves again with the ledger adding up', async (t) => {
  // The cluster's 3-second leases: a node whose renewals failed for 0.8 of a term exits; the database stays away for
  // four terms. Each node is kept by the supervisor `gate402 cluster` uses, with its id and relayer keys across runs.
  const ids = ['lo1', 'lo2'];
  const runs: ClusterNode[][] = [[], []];
  const keys: Array<Pick<ClusterNode, 'relayerKeys' | 'relayers'> | undefined> = [undefined, undefined];
  const supervisors = ids.map(
    (id, i) =>
      new NodeSupervisor({
        name: id,
        start: async () => {
          const known = keys[i];
          const node = await cluster.node(id, known ? { reuse: known } : {});
          keys[i] = { relayerKeys: node.relayerKeys, relayers: node.relayers };
          runs[i]?.push(node);
          return node.gw.child;
        },
        log: (line) => t.comment(line),
        firstBackoffMs: 500,
        maxBackoffMs: 4000,
      }),
  );
  t.teardown(() => Promise.all(supervisors.map((s) => s.stop())));
  const latest = (i: number) => runs[i]?.at(-1) as ClusterNode;
  await until(async () => runs.every((r) => r.length === 1), 'both nodes up', 240_000);
  merchant = await merchantAt(latest(0));
  const payers = await payersFor(6);
  const fromBlock = await headBlock();
  const callsBefore = fixtures.calls;
  const credentials = await Promise.all(payers.map((p, i) => x402Credential(joke(latest(i % 2)), p, caip2)));
  const answers: Answer[] = [];

  // Four buyers, two at each node; the database stops once the first of them is on chain, and stays away.
  const inFlight = [0, 1, 2, 3].map(async (i) => {
    answers[i] = await buy(latest(i % 2), credentials[i] as string);
  });
  await until(
    async () =>
      [
        ...(
          await transfersTo(
            n,
            merchant,
            payers.slice(0, 4).map((p) => p.address),
            fromBlock,
          )
        ).values(),
      ].some((v) => v.length > 0),
    'a first payment on chain',
    60_000,
  );
  const first = [latest(0), latest(1)];
  await db.server.stop();
  const stoppedAt = performance.now();
  t.comment('PostgreSQL stopped');
  await until(async () => first.every((node) => node.gw.child.exitCode !== null), 'both nodes to exit', 120_000);
  for (const node of first)
    t.ok(
      logged(node, /fenced/).length > 0,
      `${node.id} exited (${node.gw.child.exitCode}), saying it was fenced: ${logged(node, /fenced/)
        .at(-1)
        ?.slice(0, 200)}`,
    );
  await Promise.all(inFlight);
  t.comment(`answers of the four in flight: ${answers.map((d) => `${d.status} ${d.text.slice(0, 160)}`).join(' | ')}`);
  // Away for four terms in all; its supervisor meanwhile tries each node again, and each try fails to open the store.
  await new Promise((r) => setTimeout(r, Math.max(0, 12_000 - (performance.now() - stoppedAt))));
  await db.server.restart();
  t.comment('PostgreSQL started again');
  await until(async () => runs.every((r) => r.length >= 2), 'both nodes started again', 240_000);
  t.ok(
    supervisors.every((s) => s.runs >= 2),
    `started again by their supervisors (runs: ${supervisors.map((s) => s.runs).join(', ')})`,
  );

  // Every buyer asks (again) at its node's new run, as told: the four in flight and two new ones.
  const final = await Promise.all(payers.map((_, i) => (answers[i]?.status === 200 ? (answers[i] as Answer) : buy(latest(i % 2), credentials[i] as string, { patient: true, timeoutMs: 120_000 }))));
  t.comment(`final statuses: ${final.map((d) => d.status).join(',')}`);
  t.same(
    final.map((d) => d.status),
    payers.map(() => 200),
    `every buyer served: ${final
      .filter((d) => d.status !== 200)
      .map((d) => d.text.slice(0, 200))
      .join(' | ')}`,
  );
  // A node that exits (fenced) after the upstream answered and before its served mark committed leaves that call
  // behind: the restarted node serves the paid request once, so the upstream may be called more often than answers
  // were served (never fewer). Charged once, served once is what the ledger holds to here.
  const calls = () => fixtures.calls - callsBefore;
  await ledgerHolds(
    t,
    payers.map((p, i) => ({ payer: p.address, status: (final[i] as Answer).status })),
    fromBlock,
    () => Math.min(calls(), payers.length),
  );
  t.ok(calls() >= payers.length, `the upstream answered every served request (${calls()} calls for ${payers.length} buyers)`);
  await Promise.all(supervisors.map((s) => s.stop()));
});
