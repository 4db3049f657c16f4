import { CAIP2 } from '../src/chain/canonical.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { cpuWindow, type CpuFigures } from './cpu.ts';
import { benchDevnet, blockNumber, networkOf, setBlockTime, settledOnChain, type Buyer, type OnChain } from './devnet.ts';
import { openLoop, type OpenLoopResult } from './open-loop.ts';
import { benchOptions } from './options.ts';
import { startPaidStacks, type PaidTarget } from './paid-run.ts';
import { progress, writeFigures } from './report.ts';
import { SigningPool } from './sign.ts';
import type { Server } from './stacks.ts';

const opts = benchOptions({
  full: { 'block-time': '1', 'step-seconds': '5', 'start-rate': '10', 'max-rate': '1280', bisections: '3', buyers: '100', 'poll-ms': '20' },
  quick: { 'block-time': '1', 'step-seconds': '2', 'start-rate': '10', 'max-rate': '160', bisections: '1', buyers: '20', 'poll-ms': '20' },
  tiny: { 'block-time': '1', 'step-seconds': '1', 'start-rate': '2', 'max-rate': '4', bisections: '0', buyers: '4', 'poll-ms': '20' },
});
const BLOCK_TIME = opts.number('block-time');
const STEP_SECONDS = opts.number('step-seconds', { fraction: true, min: 0.5 });
const START_RATE = opts.number('start-rate');
const MAX_RATE = opts.number('max-rate');
const BISECTIONS = opts.number('bisections', { min: 0 });
const BUYERS = opts.number('buyers');
const POLL_MS = opts.number('poll-ms', { min: 10 });
/** The p99 a rate must stay under: one block plus 250 ms. */
const BUDGET_MS = BLOCK_TIME * 1000 + 250;
const CAIP = CAIP2.base;

export interface CapacityStep extends OpenLoopResult {
  /** Every request answered 200 with a p99 under the budget. */
  passed: boolean;
  answered200: number;
  /** Answered 503 (the stack shed load): counted apart, and not a 200. */
  answered503: number;
  cpu: CpuFigures;
  onChain: OnChain;
}

export interface CapacitySearch {
  /** The highest rate that passed (0: not even the lowest tried), and whether the search stopped at --max-rate still passing. */
  capacityPerSecond: number;
  reachedMaxRate: boolean;
  /** The lowest rate that failed, when one did. */
  firstFailedPerSecond: number | undefined;
  /** 503s over every step of the search. */
  answered503: number;
  steps: CapacityStep[];
}

/** One step: `rate` paid requests a second for STEP_SECONDS, every one with a payment of its own. */
async function step(n: NetworkEntry, signer: SigningPool, target: PaidTarget, buyers: Buyer[], rate: number): Promise<CapacityStep> {
  const count = Math.max(1, Math.round(rate * STEP_SECONDS));
  const headers = await signer.sign(buyers, target.offer, count);
  const requests = headers.map((h) => ({ url: target.server.url, headers: { 'payment-signature': h } }));
  const fromBlock = (await blockNumber(n)) + 1n;
  const cpu = cpuWindow(Object.fromEntries(Object.entries(target.server.processes).map(([role, child]) => [role, child.pid])));
  const run = await openLoop(requests, rate, { timeoutMs: 30_000, maxConnections: 1024 });
  const answered200 = run.outcomes['200'] ?? 0;
  const cpuUsed = cpu.end(answered200);
  const onChain = await settledOnChain(n, target.offer.payTo as `0x${string}`, BigInt(target.offer.amount), fromBlock, await blockNumber(n));
  return { ...run, passed: answered200 === run.sent && run.p99ms < BUDGET_MS, answered200, answered503: run.outcomes['503'] ?? 0, cpu: cpuUsed, onChain };
}

/** Doubling from START_RATE while steps pass (up to MAX_RATE), then BISECTIONS steps between the last pass and the first failure. */
async function search(name: string, n: NetworkEntry, signer: SigningPool, target: PaidTarget, buyers: Buyer[]): Promise<CapacitySearch> {
  const steps: CapacityStep[] = [];
  let passed = 0;
  let failed: number | undefined;
  const tryRate = async (rate: number) => {
    const s = await step(n, signer, target, buyers, rate);
    steps.push(s);
    progress(`${name} at ${rate}/s: ${s.passed ? 'passed' : 'failed'} (p99 ${s.p99ms} ms, ${JSON.stringify(s.outcomes)}, ${s.cpu.msPer200.total ?? '?'} CPU ms per 200)`);
    if (s.passed) passed = Math.max(passed, rate);
    else failed = Math.min(failed ?? rate, rate);
  };
  for (let rate = START_RATE; failed === undefined && rate <= MAX_RATE; rate *= 2) await tryRate(rate);
  for (let i = 0; i < BISECTIONS && failed !== undefined; i++) {
    const mid = Math.round((passed + failed) / 2);
    if (mid <= passed || mid >= failed || mid < 1) break;
    await tryRate(mid);
  }
  return {
    capacityPerSecond: passed,
    reachedMaxRate: failed === undefined,
    firstFailedPerSecond: failed,
    answered503: steps.reduce((sum, s) => sum + s.answered503, 0),
    steps,
  };
}

const devnet = await benchDevnet(opts.manifest);
const n = networkOf(devnet.manifest, CAIP);
progress('devnet up');
const servers: Server[] = [];
const signer = new SigningPool();
try {
  await setBlockTime(n, 0);
  const { targets, buyers } = await startPaidStacks(devnet.manifestPath, n, CAIP, servers, signer, { pollMs: POLL_MS, buyers: BUYERS });

  await setBlockTime(n, BLOCK_TIME);
  const found = {
    gate402: await search('gate402', n, signer, targets.gate402, buyers),
    reference: await search('reference', n, signer, targets.reference, buyers),
  };
  const ratio = found.reference.capacityPerSecond > 0 ? Number((found.gate402.capacityPerSecond / found.reference.capacityPerSecond).toFixed(2)) : undefined;
  progress(`capacity at ${BLOCK_TIME} s blocks: gate402 ${found.gate402.capacityPerSecond}/s, reference ${found.reference.capacityPerSecond}/s`);
  writeFigures(opts.out, {
    capacity: {
      network: CAIP,
      route: 'GET /m/catjoke/joke (0.01 stablecoin, EIP-3009)',
      blockTime: BLOCK_TIME,
      budgetMs: BUDGET_MS,
      stepSeconds: STEP_SECONDS,
      startRate: START_RATE,
      maxRate: MAX_RATE,
      bisections: BISECTIONS,
      buyers: buyers.length,
      receiptPollMs: POLL_MS,
      ...found,
      gate402VsReference: ratio,
    },
  });
} finally {
  await setBlockTime(n, 0).catch(() => {}); // a devnet given by --manifest goes back to a block per transaction
  await signer.close();
  await Promise.all(servers.map((s) => s.stop()));
  await devnet.stop();
}
