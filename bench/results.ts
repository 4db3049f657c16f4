/**
 * What a scenario's result file holds (bench/results/<scenario>.json), the issue's goals checked against it, and
 * bench/results/summary.md: one table with every figure, goal and ratio of the latest result of each scenario.
 * Pure functions of the figures the scripts wrote.
 */
import type { CapacitySearch } from './capacity.ts';
import type { CpuFigures } from './cpu.ts';
import type { SettlementGasFigures } from './gas.ts';
import type { LoadResult } from './load.ts';
import type { PaidFigures } from './paid-run.ts';

export interface Machine {
  cores: number;
  cpuModel: string;
  node: string;
  platform: string;
  memoryGb: number;
  /** 1, 5 and 15 minute load averages: well above 0 before a run means other work shared the cores. */
  loadAverageBefore: number[];
  loadAverageAfter: number[];
}

export interface ScenarioResult {
  scenario: string;
  about: string;
  profile: string;
  date: string;
  /** The command that produced this file, and each script it ran. */
  command: string;
  scripts: string[];
  durationSeconds: number;
  machine: Machine;
  /** What the scripts wrote, merged (challenge, signatures and http, paid, stock, scaling). */
  figures: Record<string, unknown>;
  goals: Goal[];
  /** Set when a script failed; the figures then hold what the others wrote. */
  error?: string;
}

export interface Goal {
  goal: string;
  measured: string;
  /** null: not judged, and `note` says why (a quick or tiny run, or not measured where the goal applies). */
  met: boolean | null;
  note?: string;
}

interface Row {
  measurement: string;
  figure: string;
  goal?: Goal;
}

// ---- the figures' shapes, as the scripts write them ----

type Load = LoadResult;
type Paid = PaidFigures;
interface ClusterRun {
  offeredPerSecond: number;
  paid: number;
  sent: number;
  paidPerSecond: number;
  p50ms: number;
  p99ms: number;
  outcomes: Record<string, number>;
  cpuMsPerPaid: { gateways: number; postgres: number; total: number };
}

interface ChannelFigures {
  channels: number;
  vouchersPerChannel: number;
  voucher: Load & { paidPerSecond: number; cpu: CpuFigures };
  exact?: Paid;
  onChain: { rowsPerClaim: number; gasPerChannel: Record<string, number>; gasPerRequest: Record<string, number>; ledger: { holds: boolean; chargedByGateway: string; merchantGain: string } };
}

interface Figures {
  channels?: ChannelFigures;
  cluster?: { nodeRatePerSecond: number; blockTime: number; lmdbOne: ClusterRun; lmdbTwo: ClusterRun; postgresTwo: ClusterRun; cpuPerPaidClusterVsTwoLmdb: number };
  challenge?: { concurrency: number; gate402: Load; bareUws: Load; x402Express: Load; gate402VsBareUws: number; gate402VsX402Express: number };
  signatures?: { environment: { cores: number }; rows: { name: string; perSecond: number; wrong: number }[]; ratios: Record<string, number> };
  http?: { simulationOff?: Load; simulationOn?: Load };
  paid?: { concurrency: number; runs: { blockTime: number; gate402: Paid; reference: Paid; gate402VsReference: number; cpuReferenceVsGate402?: number }[] };
  capacity?: { blockTime: number; budgetMs: number; stepSeconds: number; gate402: CapacitySearch; reference: CapacitySearch; gate402VsReference?: number };
  gas?: { batch: number; settlements: SettlementGasFigures[] };
  stock?: { orders: number; ordersPerSecond: number; delivered: number; belowSlippageFloor: number } & Omit<Load, 'requestsPerSecond'>;
  scaling?: { levels: Paid[] };
}

// ---- formatting ----

const int = (x: number) => Math.round(x).toLocaleString('en-US');
const times = (x: number) => `${x.toFixed(2)}×`;
const latency = (l: Pick<Load, 'p50ms' | 'p90ms' | 'p99ms'>) => `p50 ${l.p50ms} / p90 ${l.p90ms} / p99 ${l.p99ms} ms`;
const generator = (l: Load) => `${l.loadGenerator} generator at ${l.loadGeneratorCpuPercent}% of a core`;
const outcomes = (o: Record<string, number>) =>
  Object.entries(o)
    .map(([k, v]) => `${v} × ${k}`)
    .join(', ');
const atLeast = (goal: string, value: number, min: number, measured: string, note?: string): Goal => ({ goal, measured, met: value >= min, ...(note ? { note } : {}) });

function paidRow(label: string, p: Paid): Row {
  const rss = p.peakRssMb.total === undefined ? '' : `; peak RSS ${p.peakRssMb.total} MiB`;
  const chain = `; ${p.onChain.payments} settled in ${p.onChain.transactions} tx from ${p.onChain.senders} relayer(s)`;
  const cpu = p.cpu ? `; ${cpuPer200(p.cpu)}` : '';
  const gas = p.onChain.gas ? `; ${int(p.onChain.gas.perPayment)} gas per settlement` : '';
  return { measurement: label, figure: `${int(p.paidPerSecond)} paid/s (${latency(p)}; ${outcomes(p.outcomes)}${cpu}${rss}${chain}${gas}${p.ranOut ? '; ran out of pre-signed payments' : ''})` };
}

/** `2.95 CPU ms per 200 (seller 0.8 + facilitator 2.1)`: all processes, then each when there are several. */
function cpuPer200(c: CpuFigures): string {
  const { total, ...roles } = c.msPer200;
  const each = Object.entries(roles);
  const split = each.length > 1 ? ` (${each.map(([role, v]) => `${role} ${v ?? '?'}`).join(' + ')})` : '';
  return `${total ?? '?'} CPU ms per 200${split}`;
}

const cheaper = (x: number | undefined) => (x === undefined ? 'not measured' : `${x.toFixed(2)}× less CPU per 200`);

/**
 * The rows of one scenario's figures, each goal attached to the figure it judges. Goals are not judged on a quick or
 * tiny run (those runs check that the bench works, they measure little): the note says what the verdict would be.
 */
export function rowsOf(figures: Record<string, unknown>, profile: string): Row[] {
  const rows = figureRows(figures);
  if (profile === 'full') return rows;
  const caveat = `--${profile} run`;
  const would = (g: Goal) => (g.met === null ? (g.note ?? '') : `would be ${g.met ? 'met' : 'not met'}${g.note ? `; ${g.note}` : ''}`);
  return rows.map((r) => (r.goal ? { ...r, goal: { ...r.goal, met: null, note: `${caveat}: ${would(r.goal)}` } } : r));
}

function figureRows(figures: Record<string, unknown>): Row[] {
  const f = figures as Figures;
  const rows: Row[] = [];
  if (f.challenge) {
    const c = f.challenge;
    rows.push({ measurement: `402 challenges, gate402 (${c.concurrency} connections)`, figure: `${int(c.gate402.requestsPerSecond)}/s (${latency(c.gate402)}; ${generator(c.gate402)})` });
    rows.push({ measurement: '402s, bare uWebSockets.js hello-world', figure: `${int(c.bareUws.requestsPerSecond)}/s (${generator(c.bareUws)})` });
    rows.push({ measurement: '402s, official @x402/express paywall', figure: `${int(c.x402Express.requestsPerSecond)}/s (${generator(c.x402Express)})` });
    rows.push({
      measurement: 'gate402 / bare uWebSockets.js',
      figure: times(c.gate402VsBareUws),
      goal: atLeast('at least 0.8× the bare uWebSockets.js rate', c.gate402VsBareUws, 0.8, times(c.gate402VsBareUws)),
    });
    rows.push({
      measurement: 'gate402 / @x402/express paywall',
      figure: times(c.gate402VsX402Express),
      goal: atLeast('at least 5× the official paywall', c.gate402VsX402Express, 5, times(c.gate402VsX402Express)),
    });
  }
  if (f.signatures) {
    const s = f.signatures;
    const rate = (prefix: string) => s.rows.find((r) => r.name.startsWith(prefix))?.perSecond ?? 0;
    const pool = rate('(c) SignatureVerifier pool, 1024');
    const ratio = s.ratios['c/d (pool vs reference facilitator)'] ?? 0;
    const cores = s.environment.cores;
    const wrong = s.rows.reduce((n, r) => n + r.wrong, 0);
    rows.push({
      measurement: 'signature verifications through the worker pool',
      figure: `${int(pool)}/s${wrong ? ` (${wrong} WRONG)` : ''}`,
      goal: atLeast('at least 10,000 per second on 2 cores', pool, 10_000, `${int(pool)}/s on ${cores} cores`, cores === 2 ? undefined : `measured on ${cores} cores, the goal is for 2`),
    });
    rows.push({ measurement: 'the reference @x402/evm scheme verify, same payloads', figure: `${int(rate('(d)'))}/s` });
    rows.push({ measurement: 'viem recoverTypedDataAddress, same payloads', figure: `${int(rate('(a)'))}/s` });
    rows.push({ measurement: 'worker pool / reference scheme', figure: times(ratio), goal: atLeast('at least 15× the reference scheme', ratio, 15, times(ratio)) });
  }
  if (f.http) {
    for (const [key, label] of [
      ['simulationOff', 'simulation off'],
      ['simulationOn', 'simulation on'],
    ] as const) {
      const l = f.http[key];
      if (l) rows.push({ measurement: `/verify over HTTP, ${label}`, figure: `${int(l.requestsPerSecond)}/s (${latency(l)}; ${outcomes(l.outcomes)})` });
    }
  }
  if (f.paid) {
    const c = f.paid.concurrency;
    for (const run of f.paid.runs) {
      const bt = run.blockTime === 0 ? 'automine' : `${run.blockTime} s blocks`;
      rows.push(paidRow(`paid end to end, gate402, ${bt}, ${c} concurrent buyers`, run.gate402));
      rows.push(paidRow(`paid end to end, @x402/express + reference facilitator, ${bt}`, run.reference));
      const ms200 = run.gate402.cpu?.msPer200.total;
      const cpuGoal = 'at most 1.0 ms of gateway CPU per paid 200 at 100 concurrent buyers, automine';
      rows.push({
        measurement: `gate402 CPU per paid 200, ${bt}`,
        figure: run.gate402.cpu ? cpuPer200(run.gate402.cpu) : 'not measured',
        ...(run.blockTime === 0
          ? {
              goal:
                c === 100 && ms200 !== undefined
                  ? { goal: cpuGoal, measured: `${ms200} ms`, met: ms200 <= 1 }
                  : { goal: cpuGoal, measured: ms200 === undefined ? 'not measured' : `${ms200} ms`, met: null, note: c === 100 ? 'no CPU figure' : `measured at ${c} concurrent buyers` },
            }
          : {}),
      });
      rows.push({
        measurement: `reference stack CPU / gate402 CPU per paid 200, ${bt}`,
        figure: cheaper(run.cpuReferenceVsGate402),
        goal:
          run.cpuReferenceVsGate402 === undefined
            ? { goal: 'at least 10× less CPU per paid 200 than the reference stack', measured: 'not measured', met: null, note: 'no CPU figure for one of the stacks' }
            : atLeast('at least 10× less CPU per paid 200 than the reference stack', run.cpuReferenceVsGate402, 10, cheaper(run.cpuReferenceVsGate402)),
      });
      const budget = run.blockTime * 1000 + 100;
      rows.push({
        measurement: `gate402 p99, ${bt}`,
        figure: `${run.gate402.p99ms} ms`,
        goal: { goal: `p99 under one block time plus 100 ms (${budget} ms)`, measured: `${run.gate402.p99ms} ms`, met: run.gate402.p99ms < budget },
      });
      rows.push({
        measurement: `gate402 / reference stack, ${bt}`,
        figure: times(run.gate402VsReference),
        goal:
          c === 100
            ? atLeast('at least 10× the reference stack at 100 concurrent buyers', run.gate402VsReference, 10, times(run.gate402VsReference))
            : { goal: 'at least 10× the reference stack at 100 concurrent buyers', measured: times(run.gate402VsReference), met: null, note: `measured at ${c} concurrent buyers` },
      });
      const chain = run.gate402.onChain;
      const ok = run.gate402.outcomes['200'] ?? 0;
      if (chain.payments > 1) {
        rows.push({
          measurement: `gate402 settlement transactions, ${bt}`,
          figure: `${chain.payments} payments settled in ${chain.transactions} transactions from ${chain.senders} relayer(s)`,
          goal: { goal: "throughput not limited by one relayer's nonce sequence: a relayer pool", measured: `${chain.senders} relayer(s) sent settlements`, met: chain.senders > 1 },
        });
        rows.push({
          measurement: `gate402 payments per settlement transaction, ${bt}`,
          figure: String(chain.paymentsPerTransaction),
          goal: {
            goal: 'several settlements batched into one transaction where the chain allows it',
            measured: `${chain.paymentsPerTransaction} per transaction`,
            met: chain.paymentsPerTransaction > 1,
          },
        });
      }
      rows.push({
        measurement: `gate402 answers against the chain, ${bt}`,
        figure: `${ok} answered 200, ${chain.payments} settlements mined during the run`,
        goal: {
          goal: 'the per-payment result exact: every 200 has its own settlement on chain',
          measured: `${ok} × 200, ${chain.payments} mined`,
          met: chain.payments >= ok && chain.payments <= run.gate402.requests,
        },
      });
    }
  }
  if (f.capacity) {
    const c = f.capacity;
    const bt = `${c.blockTime} s blocks`;
    const found = (s: CapacitySearch) => {
      const rate = s.capacityPerSecond > 0 ? `${int(s.capacityPerSecond)} paid/s` : `below ${int(Math.min(...s.steps.map((x) => x.offeredPerSecond)))} paid/s`;
      const bound = s.reachedMaxRate ? ' (the highest rate tried: at least this)' : s.firstFailedPerSecond !== undefined ? `, ${int(s.firstFailedPerSecond)}/s failed` : '';
      const at = s.steps.find((x) => x.passed && x.offeredPerSecond === s.capacityPerSecond);
      const there = at ? `; there ${latency(at)}, ${cpuPer200(at.cpu)}` : '';
      const steps = s.steps.map((x) => `${x.offeredPerSecond}/s ${x.passed ? 'ok' : `failed (p99 ${x.p99ms} ms; ${outcomes(x.outcomes)})`}`).join(', ');
      return `${rate}${bound}${there}; ${s.answered503} × 503 over the search; steps: ${steps}`;
    };
    rows.push({ measurement: `open-loop capacity, gate402, ${bt} (p99 under ${c.budgetMs} ms, every answer 200)`, figure: found(c.gate402) });
    rows.push({ measurement: `open-loop capacity, @x402/express + reference facilitator, ${bt}`, figure: found(c.reference) });
    const goal = 'open-loop capacity at least 5× the reference stack at 1 s blocks';
    rows.push({
      measurement: `gate402 capacity / reference capacity, ${bt}`,
      figure: c.gate402VsReference === undefined ? 'the reference passed no rate tried' : times(c.gate402VsReference),
      goal:
        c.gate402VsReference === undefined
          ? { goal, measured: 'the reference passed no rate tried', met: null, note: 'try a lower --start-rate' }
          : c.gate402.reachedMaxRate && c.gate402VsReference < 5
            ? { goal, measured: `${times(c.gate402VsReference)} (gate402 passed every rate tried)`, met: null, note: 'raise --max-rate' }
            : atLeast(goal, c.gate402VsReference, 5, times(c.gate402VsReference)),
    });
  }
  if (f.gas) {
    for (const g of f.gas.settlements) {
      rows.push({ measurement: `gas per ${g.transferMethod} settlement alone (${g.network})`, figure: `${int(g.alone.gasUsed)} gas` });
      rows.push({
        measurement: `gas per ${g.transferMethod} settlement in a batch of ${g.batch.payments} (${g.network})`,
        figure: `${int(g.batch.perPayment)} gas per payment (${int(g.batch.gasUsed)} gas in ${g.batch.transactions} transaction(s))`,
        goal: {
          goal: `gas per ${g.transferMethod} settlement shown, alone and in a batch`,
          measured: `${int(g.alone.gasUsed)} alone, ${int(g.batch.perPayment)} per member of a batch of ${g.batch.payments}`,
          met: g.alone.gasUsed > 0 && g.batch.perPayment > 0,
        },
      });
    }
  }
  if (f.stock) {
    const s = f.stock;
    rows.push({
      measurement: `stock orders end to end (${s.orders} orders)`,
      figure: `${int(s.ordersPerSecond)}/s (${latency(s)}; ${s.delivered} of ${s.orders} delivered, ${s.belowSlippageFloor} below the slippage floor)`,
    });
  }
  if (f.cluster) {
    const c = f.cluster;
    const line = (x: ClusterRun) =>
      `${x.cpuMsPerPaid.total} ms CPU per paid request (${x.paid} of ${x.sent} paid at ${x.offeredPerSecond}/s offered, p50 ${x.p50ms} / p99 ${x.p99ms} ms; ${outcomes(x.outcomes)})`;
    const at = `open loop, ${c.nodeRatePerSecond}/s per node, ${c.blockTime === 0 ? 'automine' : `${c.blockTime} s blocks`}`;
    rows.push({ measurement: `paid, one gateway on LMDB (${at})`, figure: line(c.lmdbOne) });
    rows.push({ measurement: 'paid, two gateways, each on its own LMDB (relayers split as the cluster)', figure: line(c.lmdbTwo) });
    rows.push({ measurement: 'paid, two gateways on one PostgreSQL', figure: `${line(c.postgresTwo)}; of it PostgreSQL ${c.postgresTwo.cpuMsPerPaid.postgres} ms` });
    rows.push({
      measurement: 'cluster CPU per paid request / two LMDB gateways',
      figure: times(c.cpuPerPaidClusterVsTwoLmdb),
      goal: {
        goal: 'the cluster costs at most 1.2× two LMDB gateways per paid request',
        measured: times(c.cpuPerPaidClusterVsTwoLmdb),
        met: c.cpuPerPaidClusterVsTwoLmdb > 0 && c.cpuPerPaidClusterVsTwoLmdb <= 1.2,
      },
    });
  }
  if (f.channels) rows.push(...channelRows(f.channels));
  if (f.scaling) {
    for (const level of f.scaling.levels) rows.push(paidRow(`paid, gate402, automine, ${level.concurrency} concurrent buyers`, level));
  }
  return rows;
}

function channelRows(c: ChannelFigures): Row[] {
  const v = c.voucher;
  const ms = v.cpu.msPer200.total;
  const g = c.onChain.gasPerChannel;
  const perRequest = Object.entries(c.onChain.gasPerRequest).map(([r, gas]) => `${int(gas)} at ${int(Number(r))}`);
  const at1000 = c.onChain.gasPerRequest['1000'];
  return [
    {
      measurement: `paid by vouchers, ${c.channels} channels (a connection each), ${c.vouchersPerChannel} vouchers per channel`,
      figure: `${int(v.paidPerSecond)} paid/s (${latency(v)}; ${outcomes(v.outcomes)}; ${cpuPer200(v.cpu)}; ${generator(v)})`,
      goal: atLeast('at least 5,000 voucher-paid 200s per second', v.paidPerSecond, 5000, `${int(v.paidPerSecond)}/s`),
    },
    {
      measurement: 'gateway CPU per voucher-paid 200',
      figure: `${ms ?? '?'} ms`,
      goal: { goal: 'at most 0.2 ms of gateway CPU per voucher-paid 200', measured: `${ms ?? '?'} ms`, met: ms !== undefined && ms <= 0.2 },
    },
    ...(c.exact ? [paidRow('paid by exact on the same gateway, automine', c.exact)] : []),
    {
      measurement: `gas per request by requests per channel (a channel's deposit ${int(g.deposit ?? 0)}, claim share ${int(g.claim ?? 0)} in claims of ${c.onChain.rowsPerClaim}, sweep share ${int(g.settle ?? 0)})`,
      figure: `${perRequest.join(', ')}; ledger ${c.onChain.ledger.holds ? 'holds' : '**does not hold**'} (charged ${c.onChain.ledger.chargedByGateway}, merchant +${c.onChain.ledger.merchantGain})`,
      goal: { goal: 'at most 200 gas per request at 1,000 requests per channel', measured: `${int(at1000 ?? 0)} gas`, met: at1000 !== undefined && at1000 <= 200 },
    },
  ];
}

export function goalsOf(figures: Record<string, unknown>, profile: string): Goal[] {
  return rowsOf(figures, profile).flatMap((r) => (r.goal ? [r.goal] : []));
}

const cell = (s: string) => s.replace(/\|/g, '\\|');
const verdict = (g: Goal) => (g.met === null ? `not judged (${g.note ?? ''})` : `${g.met ? 'met' : '**not met**'}${g.note ? ` (${g.note})` : ''}`);

/**
 * bench/results/summary.md: every goal with its figure and verdict, then every scenario's figures, goals and ratios
 * in one table, then where each came from.
 */
export function renderSummary(results: ScenarioResult[]): string {
  const lines = [
    '# gate402 benchmarks',
    '',
    'Written by `npm run bench` from the latest `bench/results/<scenario>.json` of each scenario. Peer figures are',
    'measured in the same run on the same machine; the machine and its load are listed at the end.',
    '',
    '## Goals',
    '',
    '| scenario | goal | measured | met |',
    '|---|---|---|---|',
  ];
  for (const r of results) for (const g of goalsOf(r.figures, r.profile)) lines.push(`| ${r.scenario} | ${cell(g.goal)} | ${cell(g.measured)} | ${verdict(g)} |`);
  lines.push('', '## Figures', '', '| scenario | measurement | figure | goal | met |', '|---|---|---|---|---|');
  for (const r of results) {
    if (r.error) lines.push(`| ${r.scenario} | **failed** | ${cell(r.error.split('\n')[0] ?? '')} | | |`);
    for (const row of rowsOf(r.figures, r.profile))
      lines.push(`| ${r.scenario} | ${cell(row.measurement)} | ${cell(row.figure)} | ${row.goal ? cell(row.goal.goal) : ''} | ${row.goal ? verdict(row.goal) : ''} |`);
  }
  lines.push('', '| scenario | date | profile | command | machine | load average before → after | took |', '|---|---|---|---|---|---|---|');
  for (const r of results) {
    const m = r.machine;
    lines.push(
      `| ${r.scenario} | ${r.date} | ${r.profile} | \`${cell(r.command)}\` | ${m.cores} cores, ${cell(m.cpuModel)}, ${m.memoryGb} GB, Node ${m.node}, ${m.platform} | ${m.loadAverageBefore.join(' ')} → ${m.loadAverageAfter.join(' ')} | ${r.durationSeconds} s |`,
    );
  }
  return `${lines.join('\n')}\n`;
}
