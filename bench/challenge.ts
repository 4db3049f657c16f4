/**
 * `npm run bench -- challenge`: unpaid requests to a paid route, answered 402, per second, in one run on this
 * machine from gate402 (x402 offers and an MPP challenge), a bare uWebSockets.js hello-world (the floor), and the
 * official @x402/express seller (whose facilitator is the reference one) serving the same route. Each server is a
 * process of its own, warmed up for a second first; the load comes from `wrk` when installed (see load.ts), and
 * the generator's own CPU is reported with each figure. Each server's CPU (user + system from /proc, every process
 * that serves it) over the timed window is divided by the requests it answered: microseconds per answer, a figure
 * that depends far less on the machine's load than a rate does.
 *
 *   node --import tsx bench/challenge.ts [--seconds N] [--concurrency N] [--warm-up N]
 */
import { CAIP2 } from '../src/chain/canonical.ts';
import { freshAccount } from '../test/helpers/devnet.ts';
import { cpuWindow } from './cpu.ts';
import { benchDevnet, networkOf } from './devnet.ts';
import { load, type LoadResult } from './load.ts';
import { benchOptions } from './options.ts';
import { progress, writeFigures } from './report.ts';
import { startAll, startBareUws, startGate402, startReference, upstreamServer, type Server } from './stacks.ts';

const opts = benchOptions({
  full: { seconds: '10', concurrency: '64', 'warm-up': '1' },
  quick: { seconds: '2', concurrency: '64', 'warm-up': '1' },
  tiny: { seconds: '1', concurrency: '4', 'warm-up': '0' },
});
const SECONDS = opts.number('seconds');
const CONCURRENCY = opts.number('concurrency');
const WARM_UP = opts.number('warm-up', { min: 0 });

const devnet = await benchDevnet(opts.manifest);
const n = networkOf(devnet.manifest, CAIP2.base);
progress('devnet up');
const servers: Server[] = [];
try {
  const upstream = await upstreamServer();
  servers.push(upstream);
  const [gate402, bare, express] = await startAll(servers, [
    startGate402(devnet.manifestPath, { upstream: upstream.url, pollMs: 200 }),
    startBareUws(),
    startReference(n, CAIP2.base, { payTo: freshAccount().address, upstream: upstream.url, pollMs: 200 }),
  ] as const);
  progress('servers up');
  const rate = async (s: Server): Promise<LoadResult & { cpuMicrosPerAnswer: number | undefined }> => {
    if (WARM_UP > 0) await load({ url: s.url }, WARM_UP, CONCURRENCY); // untimed: JIT, connections
    const cpu = cpuWindow(Object.fromEntries(Object.entries(s.processes).map(([role, child]) => [role, child.pid])));
    const result = await load({ url: s.url }, SECONDS, CONCURRENCY);
    const spent = cpu.end(result.requests).totalSeconds;
    const cpuMicrosPerAnswer = spent === undefined || result.requests === 0 ? undefined : Number(((spent * 1e6) / result.requests).toFixed(1));
    return { ...result, cpuMicrosPerAnswer };
  };
  const figures = { gate402: await rate(gate402), bareUws: await rate(bare), x402Express: await rate(express) };
  const ratio = (a: LoadResult, b: LoadResult) => (b.requestsPerSecond > 0 ? Number((a.requestsPerSecond / b.requestsPerSecond).toFixed(2)) : 0);
  const challenge = {
    route: 'GET /m/catjoke/joke, unpaid',
    seconds: SECONDS,
    concurrency: CONCURRENCY,
    ...figures,
    gate402VsBareUws: ratio(figures.gate402, figures.bareUws),
    gate402VsX402Express: ratio(figures.gate402, figures.x402Express),
  };
  progress(
    `gate402 ${figures.gate402.requestsPerSecond}/s (${figures.gate402.cpuMicrosPerAnswer} us CPU per 402), bare uWS ${figures.bareUws.requestsPerSecond}/s (${figures.bareUws.cpuMicrosPerAnswer} us), @x402/express ${figures.x402Express.requestsPerSecond}/s (${figures.x402Express.cpuMicrosPerAnswer} us)`,
  );
  writeFigures(opts.out, { challenge });
} finally {
  await Promise.all(servers.map((s) => s.stop()));
  await devnet.stop();
}
