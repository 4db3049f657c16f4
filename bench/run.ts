/**
 * `npm run bench [-- <scenario>] [--quick | --tiny] [options]`: every scenario in order, or the one named. Each
 * script runs in its own process, so one's workers and sockets never skew another's figures; all share one devnet
 * started here (or the running one `--manifest` names, which the bench may drive: it funds buyers from testers
 * 20-27 and changes the block time of eip155:8453). Each scenario writes <results>/<scenario>.json (its figures,
 * the machine, its load before and after, the date, the command, the issue's goals met or not), then
 * <results>/summary.md is rewritten from the latest result of every scenario. <results> is bench/results, or
 * `--results-dir`. Options other than these pass to every script (see each for its own: --seconds, --concurrency,
 * ...), and `--quick` / `--tiny` size every scenario down (see options.ts).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { benchDevnet, type BenchDevnet } from './devnet.ts';
import { goalsOf, renderSummary, type ScenarioResult } from './results.ts';

const SCENARIOS: Record<string, { files: string[]; about: string }> = {
  challenge: {
    files: ['bench/challenge.ts'],
    about: 'unpaid requests to a paid route (402 with x402 and MPP) per second, against a bare uWebSockets.js hello-world and the official @x402/express paywall',
  },
  verify: {
    files: ['bench/verify-signatures.ts', 'bench/verify-http.ts'],
    about: 'signature verifications per second through the worker pool and by the reference @x402/evm scheme on the same payloads; /verify over HTTP with simulation off and on',
  },
  paid: {
    files: ['bench/paid.ts'],
    about: 'paid requests end to end per second, p50/p90/p99 and peak memory, at block times 0, 1 and 2 s, against @x402/express with the reference facilitator on the same devnet',
  },
  capacity: {
    files: ['bench/capacity.ts'],
    about:
      'open-loop capacity at 1 s blocks: the highest fixed arrival rate of paid requests at which every answer is 200 with a p99 under one block plus 250 ms, for gate402 and for @x402/express with the reference facilitator',
  },
  gas: {
    files: ['bench/gas.ts'],
    about: "gas per settlement as the chain's receipts report it: EIP-3009 and Permit2 payments settled by gate402 alone and in a batch",
  },
  stock: {
    files: ['bench/stock.ts'],
    about: 'completed stock orders per second (fresh buyers, official client payments, 14 stocks), p50/p90/p99',
  },
  cluster: {
    files: ['bench/cluster.ts'],
    about:
      'CPU per paid request (PostgreSQL included) and p99, open loop at one rate per node: one gateway on LMDB, two on LMDB stores of their own, two sharing an embedded PostgreSQL (goal: at most 1.2× the two on LMDB)',
  },
  channels: {
    files: ['bench/channels.ts'],
    about:
      'voucher-paid requests (x402 batch-settlement payment channels, official client) per second and gateway CPU per paid 200, against exact on the same gateway; gas per request at 1, 10, 100 and 1,000 requests per channel, from the receipts of the deposits, claims and sweep',
  },
  scaling: {
    files: ['bench/scaling.ts'],
    about: "gate402's paid requests at 1, 10, 100 and 1,000 concurrent buyers",
  },
};

function usage(): string {
  return `usage: npm run bench [-- <scenario>] [--quick | --tiny] [--results-dir dir] [--manifest devnet.json] [options]\nscenarios (all, in this order, when none is named):\n${Object.entries(
    SCENARIOS,
  )
    .map(([k, v]) => `  ${k.padEnd(10)} ${v.about}`)
    .join('\n')}\n`;
}

const args = process.argv.slice(2);
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(usage());
  process.exit(0);
}
const named = args[0] !== undefined && !args[0].startsWith('-') ? (args.shift() as string) : undefined;
if (named !== undefined && !SCENARIOS[named]) {
  process.stderr.write(`no scenario '${named}'\n${usage()}`);
  process.exit(2);
}
const take = (flag: string): string | undefined => {
  const i = args.indexOf(flag);
  if (i < 0) return undefined;
  const [, value] = args.splice(i, 2);
  if (value === undefined) throw new Error(`${flag} needs a value`);
  return value;
};
const resultsDir = resolve(take('--results-dir') ?? 'bench/results');
const profileAt = args.indexOf('--profile');
const profile = args.includes('--tiny') ? 'tiny' : args.includes('--quick') ? 'quick' : profileAt >= 0 ? (args[profileAt + 1] ?? 'full') : 'full';
const given = [...(named ? [named] : []), ...args].join(' ');
const command = process.env.npm_lifecycle_event === 'bench' ? `npm run bench${given ? ` -- ${given}` : ''}` : `node --import tsx bench/run.ts${given ? ` ${given}` : ''}`;

function machine(before: number[]): ScenarioResult['machine'] {
  const round = (xs: number[]) => xs.map((x) => Number(x.toFixed(2)));
  return {
    cores: availableParallelism(),
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    memoryGb: Number((totalmem() / 2 ** 30).toFixed(1)),
    loadAverageBefore: round(before),
    loadAverageAfter: round(loadavg()),
  };
}

/** Runs one script to its end; rejects with its exit code. */
function runScript(file: string, scriptArgs: string[]): Promise<void> {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file, ...scriptArgs], { stdio: 'inherit' });
    child.once('error', rej);
    child.once('exit', (code, signal) => (code === 0 ? res() : rej(new Error(`${file} exited ${signal ?? code}`))));
  });
}

async function runScenario(name: string, devnetArgs: string[]): Promise<ScenarioResult> {
  const scenario = SCENARIOS[name] as (typeof SCENARIOS)[string];
  const before = loadavg();
  const date = new Date().toISOString();
  const started = performance.now();
  const outDir = mkdtempSync(join(tmpdir(), `gate402-bench-${name}-`));
  const figures: Record<string, unknown> = {};
  const scripts: string[] = [];
  let error: string | undefined;
  for (const file of scenario.files) {
    const out = join(outDir, 'figures.json');
    const scriptArgs = [...args, ...devnetArgs, '--out', out];
    scripts.push(`node --import tsx ${file} ${scriptArgs.join(' ')}`);
    process.stdout.write(`\n== ${name}: ${file}\n`);
    try {
      await runScript(file, scriptArgs);
      Object.assign(figures, JSON.parse(readFileSync(out, 'utf8')) as Record<string, unknown>);
    } catch (err) {
      error = (err as Error).message;
      break;
    }
  }
  rmSync(outDir, { recursive: true, force: true });
  return {
    scenario: name,
    about: scenario.about,
    profile,
    date,
    command,
    scripts,
    durationSeconds: Number(((performance.now() - started) / 1000).toFixed(1)),
    machine: machine(before),
    figures,
    goals: goalsOf(figures, profile),
    ...(error !== undefined ? { error } : {}),
  };
}

const chosen = named ? [named] : Object.keys(SCENARIOS);
let devnet: BenchDevnet | undefined;
let failed = 0;
process.once('SIGINT', () => {
  void devnet?.stop().finally(() => process.exit(130));
});
try {
  const devnetArgs: string[] = [];
  if (!args.includes('--manifest')) {
    devnet = await benchDevnet();
    devnetArgs.push('--manifest', devnet.manifestPath);
  }
  mkdirSync(resultsDir, { recursive: true });
  for (const name of chosen) {
    const result = await runScenario(name, devnetArgs);
    if (result.error) failed++;
    writeFileSync(join(resultsDir, `${name}.json`), `${JSON.stringify(result, null, 2)}\n`);
    for (const g of result.goals) process.stdout.write(`goal: ${g.goal}: ${g.measured}, ${g.met === null ? 'not judged' : g.met ? 'met' : 'NOT met'}${g.note ? ` (${g.note})` : ''}\n`);
  }
  const latest = Object.keys(SCENARIOS)
    .map((name) => join(resultsDir, `${name}.json`))
    .filter((path) => existsSync(path))
    .map((path) => JSON.parse(readFileSync(path, 'utf8')) as ScenarioResult);
  const summary = renderSummary(latest);
  writeFileSync(join(resultsDir, 'summary.md'), summary);
  process.stdout.write(`\n${summary}\nwrote ${chosen.map((n) => `${n}.json`).join(', ')} and summary.md in ${resultsDir}\n`);
} finally {
  await devnet?.stop();
}
if (failed) {
  process.stderr.write(`${failed} scenario(s) failed\n`);
  process.exitCode = 1;
}
