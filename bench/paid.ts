import { CAIP2 } from '../src/chain/canonical.ts';
import { benchDevnet, networkOf, setBlockTime } from './devnet.ts';
import { benchOptions } from './options.ts';
import { cheaperBy, measurePaid, paidRunOptions, startPaidStacks, type PaidFigures } from './paid-run.ts';
import { progress, writeFigures } from './report.ts';
import { SigningPool } from './sign.ts';
import type { Server } from './stacks.ts';

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
  const { reference, targets, buyers } = await startPaidStacks(devnet.manifestPath, n, CAIP, servers, signer, { pollMs: POLL_MS, buyers: CONCURRENCY, nonceManager: NONCE_MANAGER });

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
