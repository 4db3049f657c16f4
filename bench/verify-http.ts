/**
 * Part of `npm run bench -- verify`: `/verify` requests per second over HTTP against a real facilitator process on
 * the devnet, with on-chain simulation on and off, from pre-signed payloads. The load generator runs in this
 * process; its CPU is reported, so a run whose generator saturated a core says so.
 *
 *   node --import tsx bench/verify-http.ts [--seconds N] [--concurrency N] [--simulation off,on]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseUnits } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { freshAccount } from '../test/helpers/devnet.ts';
import { officialPayment, requirementsFor } from '../test/helpers/payments.ts';
import { benchDevnet, fundBuyers, networkOf } from './devnet.ts';
import { load, startChild, stopChild } from './load.ts';
import { benchOptions } from './options.ts';
import { progress, writeFigures } from './report.ts';

const opts = benchOptions({
  full: { seconds: '5', concurrency: '64', simulation: 'off,on' },
  quick: { seconds: '1', concurrency: '64', simulation: 'off,on' },
  tiny: { seconds: '0.5', concurrency: '4', simulation: 'on' },
});
const SECONDS = opts.number('seconds', { fraction: true, min: 0.1 });
const CONCURRENCY = opts.number('concurrency');
const SIMULATION = opts
  .text('simulation')
  .split(',')
  .map((v) => {
    if (v !== 'off' && v !== 'on') throw new Error(`--simulation takes off, on or both, not '${v}'`);
    return v === 'on';
  });

const devnet = await benchDevnet(opts.manifest);
try {
  const n = networkOf(devnet.manifest, CAIP2.base);
  // 32 funded payers, 256 distinct signed payloads: verification never consumes a nonce, so they repeat freely.
  const payers = (await fundBuyers(n, 32, parseUnits('100', 6))).map((b) => privateKeyToAccount(b.key));
  const req = requirementsFor(CAIP2.base, n, freshAccount().address, '10000');
  const bodies = await Promise.all(
    Array.from({ length: 256 }, async (_, i) =>
      JSON.stringify({ x402Version: 2, paymentPayload: await officialPayment(payers[i % payers.length] as (typeof payers)[number], req), paymentRequirements: req }),
    ),
  );
  progress('payloads signed');

  const figures: Record<string, unknown> = { seconds: SECONDS, concurrency: CONCURRENCY };
  const dir = mkdtempSync(join(tmpdir(), 'gate402-bench-verify-'));
  try {
    for (const simulate of SIMULATION) {
      const { child, found: url } = await startChild(
        [resolve('src/cli/bin.mjs'), 'facilitator', '--manifest', devnet.manifestPath],
        {
          GATE402_FACILITATOR_PORT: '0',
          GATE402_DATA_DIR: join(dir, `data-${simulate}`),
          GATE402_SIMULATE_ON_VERIFY: String(simulate),
          GATE402_FACILITATOR_RATE_CAPACITY: '1000000',
          GATE402_FACILITATOR_RATE_PER_SECOND: '1000000',
          GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '1000000',
          GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '1000000',
        },
        (output) => /^facilitator: (http:\/\/[^\s]+)/m.exec(output)?.[1],
      );
      try {
        const verify = (i: number) => ({ url: `${url}/verify`, method: 'POST' as const, headers: { 'content-type': 'application/json' }, body: bodies[i % bodies.length] as string });
        // Warm-up, untimed: worker threads load and compile, connections open, caches fill.
        await load(verify, Math.min(1, SECONDS), CONCURRENCY);
        const row = await load(verify, SECONDS, CONCURRENCY, (status, body) => (status === 200 && (JSON.parse(body) as { isValid?: boolean }).isValid ? 'valid' : `invalid ${status}`));
        figures[simulate ? 'simulationOn' : 'simulationOff'] = row;
        progress(`/verify, simulation ${simulate ? 'on ' : 'off'}: ${row.requestsPerSecond}/s, p99 ${row.p99ms} ms`);
      } finally {
        await stopChild(child);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  writeFigures(opts.out, { http: figures });
} finally {
  await devnet.stop();
}
