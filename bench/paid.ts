/**
 * `npm run bench -- paid`: paid requests end to end (verify, settle on chain, forward to a local upstream) per
 * second, p50/p90/p99 latency and peak memory, at each block time, for gate402 and for the official stack
 * (@x402/express with the reference facilitator settling on the same devnet), with the same buyers, the same
 * concurrency and the same upstream, run after run. Payments are EIP-3009 authorizations on eip155:8453 signed
 * beforehand by the official client, one per request.
 *
 *   node --import tsx bench/paid.ts [--seconds N] [--concurrency N] [--block-times 0,1,2] [--payments N | --payment-rate N] [--poll-ms N] [--reference-nonce-manager on|off]
 *
 * --payments: payments signed per run (0: each connection's first plus --payment-rate per second of run); a run
 * that uses them up before --seconds ends early and says so (`ranOut`). A run is closed-loop: with blocks of B
 * seconds, C buyers can complete at most about C/B payments a second on any stack that settles within a block.
 * --reference-nonce-manager off: the reference facilitator's relayer as the x402 examples make it (see
 * peers/reference-facilitator.ts).
 *
 * Each run also says what it cost: the CPU seconds (user + system, from /proc) of every server process of each stack
 * (gate402's one process; the seller's and the reference facilitator's) per request answered 200, and how many times
 * less gate402 spent per 200 than the reference (`cpuReferenceVsGate402`); and the gas the chain charged per
 * settlement, alone and in batches (`onChain.gas`).
 */
import { parseUnits } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { freshAccount } from '../test/helpers/devnet.ts';
import { benchDevnet, fundBuyers, networkOf, setBlockTime } from './devnet.ts';
import { benchOptions } from './options.ts';
import { cheaperBy, measurePaid, paidRunOptions, warmUp, type PaidFigures, type PaidTarget } from './paid-run.ts';
import { progress, writeFigures } from './report.ts';
import { SigningPool } from './sign.ts';
import { offerOf, startAll, startGate402, startReference, upstreamServer, type Server } from './stacks.ts';

const opts = benchOptions({
  full: { seconds: '10', concurrency: '100', 'block-times': '0,1,2', payments: '0', 'payment-rate': '250', 'poll-ms': '20', 'reference-nonce-manager': 'on' },
  quick: { seconds: '3', concurrency: '20', 'block-times': '0,1,2', payments: '0', 'payment-rate': '150', 'poll-ms': '20', 'reference-nonce-manager': 'on' },
  // tiny: automine only; the capacity scenario runs both stacks at 1 s blocks.
  tiny: { seconds: '1', concurrency: '2', 'block-times': '0', payments: '4', 'payment-rate': '0', 'poll-ms': '20', 'reference-nonce-manager': 'on' },
});
const { seconds: SECONDS, pollMs: POLL_MS, paymentsFor } = paidRunOptions(opts);
const CONCURRENCY = opts.number('concurrency');
const BLOCK_TIMES = opts.numbers('block-times', { min: 0 });
const NONCE_MANAGER = opts.text('reference-nonce-manager') !== 'off';
const CAIP = CAIP2.base;

const devnet = await benchDevnet(opts.manifest);
const n = networkOf(devnet.manifest, CAIP);
progress('devnet up');
const servers: Server[] = [];
const signer = new SigningPool();
try {
  const upstream = await upstreamServer();
  servers.push(upstream);
  const [gate402, reference] = await startAll(servers, [
    startGate402(devnet.manifestPath, { upstream: upstream.url, pollMs: POLL_MS }),
    startReference(n, CAIP, { payTo: freshAccount().address, upstream: upstream.url, pollMs: POLL_MS, nonceManager: NONCE_MANAGER }),
  ] as const);
  const targets: Record<'gate402' | 'reference', PaidTarget> = {
    gate402: { server: gate402, offer: await offerOf(gate402.url, CAIP) },
    reference: { server: reference, offer: await offerOf(reference.url, CAIP) },
  };
  progress('stacks up');
  const buyers = await fundBuyers(n, CONCURRENCY, parseUnits('1000', 6));
  progress(`${buyers.length} buyers funded`);
  for (const target of Object.values(targets)) await warmUp(signer, target, buyers, Math.min(CONCURRENCY, 8));
  progress('warmed up');

  const count = paymentsFor(CONCURRENCY);
  const runs: { blockTime: number; gate402: PaidFigures; reference: PaidFigures; gate402VsReference: number; cpuReferenceVsGate402: number | undefined }[] = [];
  for (const blockTime of BLOCK_TIMES) {
    await setBlockTime(n, blockTime);
    const figures = {
      gate402: await measurePaid(n, signer, targets.gate402, buyers, { count, seconds: SECONDS, concurrency: CONCURRENCY }),
      reference: await measurePaid(n, signer, targets.reference, buyers, { count, seconds: SECONDS, concurrency: CONCURRENCY }),
    };
    const ratio = figures.reference.paidPerSecond > 0 ? Number((figures.gate402.paidPerSecond / figures.reference.paidPerSecond).toFixed(2)) : 0;
    const cpuRatio = cheaperBy(figures.gate402.cpu.msPer200.total, figures.reference.cpu.msPer200.total);
    runs.push({ blockTime, ...figures, gate402VsReference: ratio, cpuReferenceVsGate402: cpuRatio });
    const line = (f: PaidFigures) => `${f.paidPerSecond} paid/s (p99 ${f.p99ms} ms, ${f.cpu.msPer200.total ?? '?'} CPU ms per 200, ${JSON.stringify(f.outcomes)})`;
    progress(`block time ${blockTime} s: gate402 ${line(figures.gate402)}, reference ${line(figures.reference)}`);
  }
  writeFigures(opts.out, {
    paid: {
      network: CAIP,
      route: 'GET /m/catjoke/joke (0.01 stablecoin, EIP-3009)',
      concurrency: CONCURRENCY,
      buyers: buyers.length,
      seconds: SECONDS,
      receiptPollMs: POLL_MS,
      reference: { relayer: reference.relayer, nonces: NONCE_MANAGER ? "viem's nonce manager" : 'read from the chain per transaction, as in the x402 examples' },
      runs,
    },
  });
} finally {
  await setBlockTime(n, 0).catch(() => {}); // a devnet given by --manifest goes back to a block per transaction
  await signer.close();
  await Promise.all(servers.map((s) => s.stop()));
  await devnet.stop();
}
