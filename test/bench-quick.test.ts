import t from 'tap';
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { CapacitySearch } from '../bench/capacity.ts';
import type { SettlementGasFigures } from '../bench/gas.ts';
import type { LoadResult as Load } from '../bench/load.ts';
import type { PaidFigures as Paid } from '../bench/paid-run.ts';
import type { ScenarioResult } from '../bench/results.ts';
import { spawnOwnDevnet } from './helpers/spawn-devnet.ts';
import { tempDir } from './helpers/temp-dir.ts';

// The bench on its smallest loads (`--tiny`), into a results directory of its own. Benchmarks are not timed tests, so
// the suite runs only the cheapest scenarios that still start gate402, settle on both chains (EIP-3009 and Permit2,
// alone and batched) and run the stock desk end to end: `gas` and `stock`, one after the other on one devnet. Every
// bench script is type-checked by `npm run typecheck`; every scenario runs with GATE402_BENCH_ALL=1 (about 3 min):
//   GATE402_BENCH_ALL=1 npx tap test/bench-quick.test.ts
// The bench sets the block time of its chains, which would stall every other test on the shared devnet, so it runs
// on a devnet of this file's own (and funds its buyers there; the `bench` tester slot stays unused). Each scenario's
// `gate402 start --manifest` reuses that devnet: on a loaded machine it once took it for dead, started chains of its
// own, and every stock order was refused there for a balance the buyer held on this one (see src/devnet/run.ts).
const ALL = ['challenge', 'verify', 'paid', 'capacity', 'gas', 'stock', 'cluster', 'scaling'];
const SCENARIOS = process.env.GATE402_BENCH_ALL === '1' ? ALL : ['gas', 'stock'];
const ran = (scenario: string) => SCENARIOS.includes(scenario);
const skipped = { skip: 'not run in the suite (GATE402_BENCH_ALL=1 runs it)' };
const dir = tempDir('bench-test');
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const devnet = await spawnOwnDevnet('bench-devnet');
t.teardown(() => devnet.stop());

/** `bench/run.ts <scenario> --tiny` on this file's devnet: its exit code and the tail of its output. */
async function runScenario(scenario: string): Promise<{ code: number | null; output: string }> {
  const output: string[] = [];
  const code = await new Promise<number | null>((res) => {
    const args = ['--import', 'tsx', 'bench/run.ts', scenario, '--tiny', '--manifest', devnet.manifestPath, '--results-dir', dir];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d: Buffer) => output.push(d.toString()));
    child.stderr.on('data', (d: Buffer) => output.push(d.toString()));
    child.once('exit', res);
  });
  return { code, output: output.join('').slice(-4000) };
}
// Every run first, then the assertions (the file's test must not end while a run is awaited).
const runs: [string, Awaited<ReturnType<typeof runScenario>>][] = [];
for (const scenario of SCENARIOS) runs.push([scenario, await runScenario(scenario)]);
for (const [scenario, run] of runs) t.equal(run.code, 0, `the ${scenario} scenario ran`, { output: run.output });

const result = (scenario: string): ScenarioResult => JSON.parse(readFileSync(join(dir, `${scenario}.json`), 'utf8')) as ScenarioResult;
const onlyStatus = (outcomes: Record<string, number>, status: string) => Object.keys(outcomes).length === 1 && (outcomes[status] ?? 0) > 0;

for (const scenario of SCENARIOS) {
  t.test(`${scenario}.json says where and how it was measured`, async (t) => {
    const r = result(scenario);
    t.equal(r.scenario, scenario);
    t.equal(r.profile, 'tiny');
    t.notOk(r.error, 'no script failed');
    t.ok(Date.parse(r.date) > Date.now() - 3_600_000, 'dated now');
    t.match(r.command, new RegExp(`bench/run\\.ts ${scenario} --tiny`));
    t.ok(r.scripts.length > 0 && r.scripts.every((s) => s.includes('--manifest')), 'the scripts ran on the run devnet');
    t.ok(r.machine.cores >= 1 && r.machine.cpuModel.length > 0 && /^v\d+/.test(r.machine.node), 'cores, cpu and node named');
    t.equal(r.machine.loadAverageBefore.length, 3);
    t.equal(r.machine.loadAverageAfter.length, 3);
    t.ok(r.durationSeconds > 0);
    for (const g of r.goals) t.ok(g.met === null && /^--tiny run/.test(g.note ?? ''), `a tiny run judges no goal, and says so: ${g.goal}`);
  });
}

t.test('challenge: every server answered, gate402 and the paywall with 402s, the bare server with 200s', ran('challenge') ? {} : skipped, async (t) => {
  const c = result('challenge').figures.challenge as { gate402: Load; bareUws: Load; x402Express: Load; gate402VsBareUws: number; gate402VsX402Express: number };
  t.ok(onlyStatus(c.gate402.outcomes, '402'), JSON.stringify(c.gate402.outcomes));
  t.ok(onlyStatus(c.x402Express.outcomes, '402'), JSON.stringify(c.x402Express.outcomes));
  t.ok(onlyStatus(c.bareUws.outcomes, '200'), JSON.stringify(c.bareUws.outcomes));
  for (const l of [c.gate402, c.bareUws, c.x402Express]) {
    t.ok(l.requestsPerSecond > 0 && l.p50ms <= l.p90ms && l.p90ms <= l.p99ms, 'a rate and ordered percentiles');
    t.ok(l.loadGeneratorCpuPercent >= 0, 'the generator reports its CPU');
  }
  t.ok(c.gate402VsBareUws > 0 && c.gate402VsX402Express > 0, 'ratios measured');
  t.equal(result('challenge').goals.length, 2, 'both challenge goals judged');
});

t.test('verify: the pool and the reference scheme verified every payload right; /verify over HTTP said valid', ran('verify') ? {} : skipped, async (t) => {
  const f = result('verify').figures as { signatures: { rows: { name: string; perSecond: number; wrong: number }[] }; http: { simulationOn: Load } };
  t.ok(f.signatures.rows.length > 0 && f.signatures.rows.every((r) => r.wrong === 0 && r.perSecond > 0), 'no wrong signer, positive rates');
  t.ok(
    f.signatures.rows.some((r) => r.name.startsWith('(c) SignatureVerifier pool')),
    'the worker pool',
  );
  t.ok(
    f.signatures.rows.some((r) => r.name.startsWith('(d) @x402/evm')),
    'the reference scheme',
  );
  t.ok(onlyStatus(f.http.simulationOn.outcomes, 'valid'), JSON.stringify(f.http.simulationOn.outcomes));
});

t.test('paid: at each block time both stacks answered every paid request 200, each one settlement on chain, its CPU and gas measured', ran('paid') ? {} : skipped, async (t) => {
  const p = result('paid').figures.paid as { runs: { blockTime: number; gate402: Paid; reference: Paid; gate402VsReference: number; cpuReferenceVsGate402: number }[] };
  t.same(
    p.runs.map((r) => r.blockTime),
    [0],
  );
  for (const run of p.runs) {
    for (const [name, s] of [
      ['gate402', run.gate402],
      ['reference', run.reference],
    ] as const) {
      t.ok(onlyStatus(s.outcomes, '200'), `${name}, ${run.blockTime} s: ${JSON.stringify(s.outcomes)}`);
      t.equal(s.onChain.payments, s.requests, `${name}, ${run.blockTime} s: one settlement mined per answer`);
      t.ok(s.onChain.transactions > 0 && s.onChain.senders > 0);
      t.ok(s.requests <= s.presigned && s.paidPerSecond > 0);
      t.ok((s.peakRssMb.total ?? 0) > 0, `${name}: peak memory of its processes`);
      t.equal(s.cpu.answered200, s.outcomes['200'], `${name}: CPU counted against the 200s`);
      t.ok((s.cpu.msPer200.total ?? 0) > 0, `${name}, ${run.blockTime} s: CPU ms per 200 of its processes (${JSON.stringify(s.cpu.msPer200)})`);
      t.ok(s.onChain.gas.perPayment > 20_000, `${name}: gas per settlement from the receipts (${s.onChain.gas.perPayment})`);
    }
    t.ok(Object.keys(run.reference.cpu.seconds).sort().join() === 'facilitator,seller', 'the reference: seller and facilitator each measured');
    t.ok(run.gate402VsReference > 0);
    t.ok(run.cpuReferenceVsGate402 > 0, 'the CPU ratio');
  }
});

t.test('capacity: both stacks searched at 1 s blocks, open loop; every request of every step answered and counted', ran('capacity') ? {} : skipped, async (t) => {
  const c = result('capacity').figures.capacity as { blockTime: number; budgetMs: number; gate402: CapacitySearch; reference: CapacitySearch };
  t.equal(c.blockTime, 1);
  t.equal(c.budgetMs, 1250, 'one block plus 250 ms');
  for (const [name, s] of [
    ['gate402', c.gate402],
    ['reference', c.reference],
  ] as const) {
    t.same(s.steps.map((x) => x.offeredPerSecond).slice(0, 1), [2], `${name}: the search starts at the tiny start rate`);
    for (const x of s.steps) {
      t.equal(
        Object.values(x.outcomes).reduce((a, b) => a + b, 0),
        x.sent,
        `${name} at ${x.offeredPerSecond}/s: every request answered or failed, once`,
      );
      t.equal(x.passed, x.answered200 === x.sent && x.p99ms < c.budgetMs, `${name} at ${x.offeredPerSecond}/s: the verdict follows from the answers`);
      t.equal(x.onChain.payments, x.answered200, `${name} at ${x.offeredPerSecond}/s: a settlement on chain per 200`);
      if (x.answered200 > 0) t.ok((x.cpu.msPer200.total ?? 0) > 0, `${name} at ${x.offeredPerSecond}/s: CPU per 200`);
    }
    t.equal(s.capacityPerSecond, Math.max(0, ...s.steps.filter((x) => x.passed).map((x) => x.offeredPerSecond)), `${name}: the capacity is the highest rate that passed`);
  }
});

t.test('gas: EIP-3009 and Permit2 settled alone and in a batch, gas from their receipts, a batch cheaper per payment', ran('gas') ? {} : skipped, async (t) => {
  const g = result('gas').figures.gas as { batch: number; settlements: SettlementGasFigures[] };
  t.same(
    g.settlements.map((s) => s.transferMethod),
    ['EIP-3009', 'Permit2'],
  );
  for (const s of g.settlements) {
    t.ok(s.alone.gasUsed > 21_000, `${s.transferMethod} alone: ${s.alone.gasUsed} gas`);
    t.equal(s.batch.payments, g.batch);
    t.equal(s.batch.transactions, 1, `${s.transferMethod}: the ${g.batch} payments sent together shared one transaction`);
    t.ok(s.batch.perPayment > 0 && s.batch.perPayment < s.alone.gasUsed, `${s.transferMethod}: ${s.batch.perPayment} gas per batch member, below ${s.alone.gasUsed} alone`);
  }
});

t.test('stock: every order delivered', ran('stock') ? {} : skipped, async (t) => {
  const s = result('stock').figures.stock as { orders: number; delivered: number; ordersPerSecond: number; outcomes: Record<string, number> };
  // Each answer by its status and the order's state (and failure reason): what went wrong, when one is not delivered.
  t.equal(s.delivered, s.orders, `${s.delivered} of ${s.orders} delivered: ${JSON.stringify(s.outcomes)}`, { outcomes: s.outcomes });
  t.ok(onlyStatus(s.outcomes, '200 delivered'), `every answer a 200 with the order delivered: ${JSON.stringify(s.outcomes)}`);
  t.ok(s.ordersPerSecond > 0);
});

t.test('scaling: each level of concurrent buyers answered 200, each one settlement on chain', ran('scaling') ? {} : skipped, async (t) => {
  const s = result('scaling').figures.scaling as { levels: (Paid & { concurrency: number })[] };
  t.same(
    s.levels.map((l) => l.concurrency),
    [1, 4],
  );
  for (const l of s.levels) {
    t.ok(onlyStatus(l.outcomes, '200'), JSON.stringify(l.outcomes));
    t.equal(l.onChain.payments, l.requests);
  }
});

t.test('cluster: one LMDB node, two LMDB nodes and two PostgreSQL nodes paid at one open-loop rate per node, their CPU per paid request measured', ran('cluster') ? {} : skipped, async (t) => {
  type Run = {
    nodes: number;
    offeredPerSecond: number;
    sent: number;
    paid: number;
    settledOnChain: number;
    outcomes: Record<string, number>;
    cpuMsPerPaid: { gateways: number; postgres: number; total: number };
    rpcPerPaid: { total: number; byMethod: Record<string, number> };
  };
  const c = result('cluster').figures.cluster as Record<'lmdbOne' | 'lmdbTwo' | 'postgresTwo', Run> & {
    nodeRatePerSecond: number;
    cpuPerPaidClusterVsTwoLmdb: number;
    cpuPerPaidTwoLmdbVsOneLmdb: number;
  };
  for (const [name, run, nodes] of [
    ['one LMDB node', c.lmdbOne, 1],
    ['two LMDB nodes', c.lmdbTwo, 2],
    ['two PostgreSQL nodes', c.postgresTwo, 2],
  ] as const) {
    t.equal(run.nodes, nodes, name);
    t.equal(run.offeredPerSecond, c.nodeRatePerSecond * nodes, `${name}: the same rate per node`);
    // A loaded machine may shed some (503 before anything is charged); nothing else.
    t.ok(run.paid > 0 && run.paid + (run.outcomes['503'] ?? 0) === run.sent, `${name}: every request paid and served, or shed uncharged (${JSON.stringify(run.outcomes)})`);
    t.equal(run.settledOnChain, run.paid, `${name}: one settlement on chain per 200`);
    t.ok(run.cpuMsPerPaid.gateways > 0, `${name}: gateway CPU per paid request read from /proc`);
    t.ok((run.rpcPerPaid.byMethod.eth_sendRawTransaction ?? 0) > 0 && run.rpcPerPaid.total >= 1, `${name}: the gateways' RPC calls per paid request, from their /metrics (${run.rpcPerPaid.total})`);
    t.ok(Math.abs(run.cpuMsPerPaid.total - run.cpuMsPerPaid.gateways - run.cpuMsPerPaid.postgres) < 0.01, `${name}: the total is the gateways and PostgreSQL`);
  }
  t.equal(c.lmdbOne.cpuMsPerPaid.postgres, 0, 'no PostgreSQL in an LMDB run');
  t.equal(c.lmdbTwo.cpuMsPerPaid.postgres, 0);
  t.ok(c.postgresTwo.cpuMsPerPaid.postgres > 0, "PostgreSQL's processes counted");
  t.ok(c.cpuPerPaidClusterVsTwoLmdb > 0 && c.cpuPerPaidTwoLmdbVsOneLmdb > 0, 'the ratios are there');
});

t.test('summary.md: every goal with its verdict, then one table with every scenario', async (t) => {
  const md = readFileSync(join(dir, 'summary.md'), 'utf8');
  const [goalsPart, figuresPart] = md.split('## Figures') as [string, string];
  t.match(goalsPart, /\| scenario \| goal \| measured \| met \|/);
  t.match(figuresPart, /\| scenario \| measurement \| figure \| goal \| met \|/);
  for (const scenario of SCENARIOS) t.match(figuresPart, new RegExp(`^\\| ${scenario} \\|`, 'm'));
  const verdicts = (part: string) => part.split('\n').filter((line) => !line.startsWith('| scenario ') && /\| not judged \(--tiny run[^|]*\|$/.test(line)).length;
  const goals = SCENARIOS.reduce((n, s) => n + result(s).goals.length, 0);
  t.equal(verdicts(goalsPart), goals, 'each goal listed once, not judged on a tiny run');
  t.equal(verdicts(figuresPart), goals, 'and beside the figure it judges');
  for (const [scenario, goal] of [
    ['paid', 'at most 1.0 ms of gateway CPU per paid 200'],
    ['challenge', 'at least 0.8× the bare uWebSockets.js rate'],
    ['paid', 'at least 10× less CPU per paid 200'],
    ['capacity', 'open-loop capacity at least 5×'],
    ['gas', 'gas per Permit2 settlement shown'],
  ] as const)
    if (ran(scenario)) t.ok(goalsPart.includes(goal), `the goal '${goal}' is listed`);
  t.notMatch(md, /\*\*failed\*\*/);
});
