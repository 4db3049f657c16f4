/**
 * One timed run of paid requests against one stack, shared by the paid and scaling benches: pre-signed payments
 * (one authorization each), `concurrency` keep-alive connections each sending its next paid request as soon as the
 * previous one is answered, for `seconds` or until the payments run out; then what the chain shows for the run, and
 * the CPU time and peak memory of the stack's processes during it.
 */
import { parseUnits } from 'viem';
import type { PaymentRequirements } from '../src/protocol/x402/types.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { freshAccount } from '../test/helpers/devnet.ts';
import { cpuWindow, type CpuFigures } from './cpu.ts';
import { blockNumber, fundBuyers, settledOnChain, type Buyer, type OnChain } from './devnet.ts';
import { load, peakRssMb, resetPeakRss, type LoadResult } from './load.ts';
import type { BenchOptions } from './options.ts';
import type { SigningPool } from './sign.ts';
import { progress } from './report.ts';
import { offerOf, startAll, startGate402, startReference, upstreamServer, type Server } from './stacks.ts';

export interface PaidTarget {
  server: Server;
  /** The x402 offer its 402 made on the bench's network. */
  offer: PaymentRequirements;
}

export interface PaidFigures extends LoadResult {
  /** Requests answered 200 (paid, settled and served) per second: the figure of a paid run. `requestsPerSecond` counts every answer. */
  paidPerSecond: number;
  concurrency: number;
  buyers: number;
  /** Payments signed for the run; when all were used before `seconds` were up, `ranOut` says so. */
  presigned: number;
  ranOut: boolean;
  /** Settlements mined during the run (transfers of the price to the payee), the transactions and relayers that carried them. */
  onChain: OnChain & { paymentsPerTransaction: number };
  /** Peak resident memory of each of the stack's processes during the run, and their sum (MiB). */
  peakRssMb: Record<string, number | undefined> & { total: number | undefined };
  /** CPU time (user + system) of each of the stack's processes during the run, and per request answered 200. */
  cpu: CpuFigures;
}

/** The options of a paid run, common to the paid and scaling benches (each gives their defaults per size). */
export type PaidRunOption = 'seconds' | 'payments' | 'payment-rate' | 'poll-ms';

export function paidRunOptions(opts: BenchOptions<PaidRunOption>) {
  const seconds = opts.number('seconds', { fraction: true, min: 0.1 });
  const fixed = opts.number('payments', { min: 0 });
  const perSecond = opts.number('payment-rate', { min: 0 });
  return {
    seconds,
    /** Receipts polled this often by both stacks. */
    pollMs: opts.number('poll-ms', { min: 10 }),
    /** Payments to pre-sign for a run: --payments when given, else every connection's first plus --payment-rate for each second. */
    paymentsFor: (concurrency: number) => (fixed > 0 ? fixed : concurrency + Math.ceil(perSecond * seconds)),
  };
}

/** The first `count` buyers' payments for `target`, sent `concurrency` at a time for `seconds` (or until used up). */
export async function measurePaid(n: NetworkEntry, signer: SigningPool, target: PaidTarget, buyers: Buyer[], opts: { count: number; seconds: number; concurrency: number }): Promise<PaidFigures> {
  const headers = await signer.sign(buyers, target.offer, opts.count);
  const pids = Object.entries(target.server.processes).map(([role, child]) => [role, child.pid] as const);
  for (const [, pid] of pids) resetPeakRss(pid);
  const fromBlock = (await blockNumber(n)) + 1n;
  const cpu = cpuWindow(Object.fromEntries(pids));
  const run = await load((i) => (i < headers.length ? { url: target.server.url, headers: { 'payment-signature': headers[i] as string } } : undefined), opts.seconds, opts.concurrency);
  const cpuUsed = cpu.end(run.outcomes['200'] ?? 0);
  const peaks = Object.fromEntries(pids.map(([role, pid]) => [role, peakRssMb(pid)]));
  const values = Object.values(peaks);
  const total = values.every((v) => v !== undefined) ? values.reduce((a, b) => (a as number) + (b as number), 0) : undefined;
  const onChain = await settledOnChain(n, target.offer.payTo as `0x${string}`, BigInt(target.offer.amount), fromBlock, await blockNumber(n));
  return {
    ...run,
    paidPerSecond: run.seconds > 0 ? Math.round((run.outcomes['200'] ?? 0) / run.seconds) : 0,
    concurrency: opts.concurrency,
    buyers: buyers.length,
    presigned: headers.length,
    ranOut: run.requests >= headers.length && run.seconds < opts.seconds,
    onChain: { ...onChain, paymentsPerTransaction: onChain.transactions ? Number((onChain.payments / onChain.transactions).toFixed(2)) : 0 },
    peakRssMb: { ...peaks, total },
    cpu: cpuUsed,
  };
}

/** How many times fewer CPU milliseconds per 200 `ours` spent than `theirs`; undefined unless both were measured and ours is above 0. */
export function cheaperBy(ours: number | undefined, theirs: number | undefined): number | undefined {
  return ours === undefined || theirs === undefined || ours <= 0 ? undefined : Number((theirs / ours).toFixed(2));
}

/** A few paid requests, untimed, so that the first timed run does not pay for JIT compilation and cold connections. */
export async function warmUp(signer: SigningPool, target: PaidTarget, buyers: Buyer[], count: number): Promise<void> {
  const headers = await signer.sign(buyers, target.offer, count);
  await load((i) => (i < headers.length ? { url: target.server.url, headers: { 'payment-signature': headers[i] as string } } : undefined), 60, Math.min(count, 8));
}

/**
 * gate402 and the reference stack side by side on one fixture upstream (every server pushed to `servers`, for the
 * caller to stop), each with its offer on `caip2`, and `buyers` funded buyers who have each paid through both once.
 */
export async function startPaidStacks(manifestPath: string, n: NetworkEntry, caip2: string, servers: Server[], signer: SigningPool, opts: { pollMs: number; buyers: number; nonceManager?: boolean }) {
  const upstream = await upstreamServer();
  servers.push(upstream);
  const [gate402, reference] = await startAll(servers, [
    startGate402(manifestPath, { upstream: upstream.url, pollMs: opts.pollMs }),
    startReference(n, caip2, { payTo: freshAccount().address, upstream: upstream.url, pollMs: opts.pollMs, ...(opts.nonceManager !== undefined ? { nonceManager: opts.nonceManager } : {}) }),
  ] as const);
  const targets: Record<'gate402' | 'reference', PaidTarget> = {
    gate402: { server: gate402, offer: await offerOf(gate402.url, caip2) },
    reference: { server: reference, offer: await offerOf(reference.url, caip2) },
  };
  progress('stacks up');
  const buyers = await fundBuyers(n, opts.buyers, parseUnits('1000', 6));
  progress(`${buyers.length} buyers funded`);
  for (const target of Object.values(targets)) await warmUp(signer, target, buyers, Math.min(opts.buyers, 8));
  progress('warmed up');
  return { gate402, reference, targets, buyers };
}
