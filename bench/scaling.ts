/**
 * `npm run bench -- scaling`: gate402's paid scenario (automine) at growing numbers of concurrent buyers, one
 * connection and one funded buyer key each, to show how throughput and latency grow with them.
 *
 *   node --import tsx bench/scaling.ts [--levels 1,10,100,1000] [--seconds N] [--payments N | --payment-rate N] [--poll-ms N]
 */
import { parseUnits } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { benchDevnet, fundBuyers, networkOf, setBlockTime } from './devnet.ts';
import { benchOptions } from './options.ts';
import { measurePaid, paidRunOptions, warmUp, type PaidFigures, type PaidTarget } from './paid-run.ts';
import { progress, writeFigures } from './report.ts';
import { SigningPool } from './sign.ts';
import { offerOf, startAll, startGate402, upstreamServer, type Server } from './stacks.ts';

const opts = benchOptions({
  full: { levels: '1,10,100,1000', seconds: '10', payments: '0', 'payment-rate': '250', 'poll-ms': '20' },
  quick: { levels: '1,10,100', seconds: '3', payments: '0', 'payment-rate': '150', 'poll-ms': '20' },
  tiny: { levels: '1,4', seconds: '1', payments: '0', 'payment-rate': '2', 'poll-ms': '20' },
});
const LEVELS = opts.numbers('levels');
const { seconds: SECONDS, pollMs: POLL_MS, paymentsFor } = paidRunOptions(opts);
const CAIP = CAIP2.base;

const devnet = await benchDevnet(opts.manifest);
const n = networkOf(devnet.manifest, CAIP);
progress('devnet up');
const servers: Server[] = [];
const signer = new SigningPool();
try {
  await setBlockTime(n, 0);
  const upstream = await upstreamServer();
  servers.push(upstream);
  const [gate402] = await startAll(servers, [startGate402(devnet.manifestPath, { upstream: upstream.url, pollMs: POLL_MS })] as const);
  const target: PaidTarget = { server: gate402, offer: await offerOf(gate402.url, CAIP) };
  const buyers = await fundBuyers(n, Math.max(...LEVELS), parseUnits('1000', 6));
  progress(`${buyers.length} buyers funded`);
  await warmUp(signer, target, buyers, Math.min(Math.max(...LEVELS), 8));

  const levels: PaidFigures[] = [];
  for (const concurrency of LEVELS) {
    const count = paymentsFor(concurrency);
    const figures = await measurePaid(n, signer, target, buyers.slice(0, concurrency), { count, seconds: SECONDS, concurrency });
    levels.push(figures);
    progress(`${concurrency} concurrent buyers: ${figures.paidPerSecond} paid/s, p50 ${figures.p50ms} ms, p99 ${figures.p99ms} ms, ${JSON.stringify(figures.outcomes)}`);
  }
  writeFigures(opts.out, { scaling: { network: CAIP, blockTime: 0, seconds: SECONDS, receiptPollMs: POLL_MS, levels } });
} finally {
  await signer.close();
  await Promise.all(servers.map((s) => s.stop()));
  await devnet.stop();
}
