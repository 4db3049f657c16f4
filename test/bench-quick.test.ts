import t from 'tap';
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { LoadResult as Load } from '../bench/load.ts';
import type { PaidFigures as Paid } from '../bench/paid-run.ts';
import type { ScenarioResult } from '../bench/results.ts';
import { tempDir } from './helpers/temp-dir.ts';

// `npm run bench -- --tiny`: every scenario of the bench on the smallest loads, into a results directory of its
// own. The bench sets the block time of its chains, which would stall every other test on the shared devnet, so it
// runs on a devnet it starts itself (and funds its buyers there; the `bench` tester slot stays unused).
const dir = tempDir('bench-test');
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const output: string[] = [];
const code = await new Promise<number | null>((res) => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--tiny', '--results-dir', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (d: Buffer) => output.push(d.toString()));
  child.stderr.on('data', (d: Buffer) => output.push(d.toString()));
  child.once('exit', res);
});
t.equal(code, 0, 'the whole bench ran', { output: output.join('').slice(-4000) });

const result = (scenario: string): ScenarioResult => JSON.parse(readFileSync(join(dir, `${scenario}.json`), 'utf8')) as ScenarioResult;
const onlyStatus = (outcomes: Record<string, number>, status: string) => Object.keys(outcomes).length === 1 && (outcomes[status] ?? 0) > 0;

for (const scenario of ['challenge', 'verify', 'paid', 'stock', 'cluster', 'scaling']) {
  t.test(`${scenario}.json says where and how it was measured`, async (t) => {
    const r = result(scenario);
    t.equal(r.scenario, scenario);
    t.equal(r.profile, 'tiny');
    t.notOk(r.error, 'no script failed');
    t.ok(Date.parse(r.date) > Date.now() - 3_600_000, 'dated now');
    t.match(r.command, /bench\/run\.ts --tiny/);
    t.ok(r.scripts.length > 0 && r.scripts.every((s) => s.includes('--manifest')), 'the scripts ran on the run devnet');
    t.ok(r.machine.cores >= 1 && r.machine.cpuModel.length > 0 && /^v\d+/.test(r.machine.node), 'cores, cpu and node named');
    t.equal(r.machine.loadAverageBefore.length, 3);
    t.equal(r.machine.loadAverageAfter.length, 3);
    t.ok(r.durationSeconds > 0);
    for (const g of r.goals) t.ok(g.met === null || typeof g.met === 'boolean', `goal judged: ${g.goal}`);
  });
}

t.test('challenge: every server answered, gate402 and the paywall with 402s, the bare server with 200s', async (t) => {
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

t.test('verify: the pool and the reference scheme verified every payload right; /verify over HTTP said valid', async (t) => {
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

t.test('paid: at each block time both stacks answered every paid request 200, each one settlement on chain', async (t) => {
  const p = result('paid').figures.paid as { runs: { blockTime: number; gate402: Paid; reference: Paid; gate402VsReference: number }[] };
  t.same(
    p.runs.map((r) => r.blockTime),
    [0, 1],
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
    }
    t.ok(run.gate402VsReference > 0);
  }
});

t.test('stock: every order delivered', async (t) => {
  const s = result('stock').figures.stock as { orders: number; delivered: number; ordersPerSecond: number };
  t.equal(s.delivered, s.orders);
  t.ok(s.ordersPerSecond > 0);
});

t.test('scaling: each level of concurrent buyers answered 200, each one settlement on chain', async (t) => {
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

t.test('cluster: both runs paid and served, their CPU per paid request measured', async (t) => {
  const c = result('cluster').figures.cluster as Record<'lmdb' | 'postgres', { paid: number; cpuMsPerPaid: { total: number } }> & { cpuPerPaidClusterVsLmdb: number };
  for (const run of [c.lmdb, c.postgres]) {
    t.ok(run.paid > 0, 'requests answered 200');
    t.ok(run.cpuMsPerPaid.total > 0, 'CPU per paid request read from /proc');
  }
  t.ok(c.cpuPerPaidClusterVsLmdb > 0, 'the ratio is there');
});

t.test('summary.md: one table with every scenario, each goal judged', async (t) => {
  const md = readFileSync(join(dir, 'summary.md'), 'utf8');
  t.match(md, /\| scenario \| measurement \| figure \| goal \| met \|/);
  for (const scenario of ['challenge', 'verify', 'paid', 'stock', 'cluster', 'scaling']) t.match(md, new RegExp(`^\\| ${scenario} \\|`, 'm'));
  const judged = md.split('\n').filter((line) => !line.startsWith('| scenario ') && /\| (met|\*\*not met\*\*|not evaluated)[^|]*\|$/.test(line));
  const goals = ['challenge', 'verify', 'paid'].reduce((n, s) => n + result(s).goals.length, 0);
  t.equal(judged.length, goals, 'a verdict per goal');
  t.notMatch(md, /\*\*failed\*\*/);
});
