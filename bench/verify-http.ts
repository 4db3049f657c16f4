/**
 * `/verify` requests per second over HTTP against a real facilitator process on a devnet, with on-chain simulation
 * on and off, from pre-signed payloads. The load generator runs in this process; its CPU is reported, so a run
 * whose generator saturated a core says so.
 *
 *   node --import tsx bench/verify-http.ts [--seconds N] [--concurrency N]
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseUnits } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { stablecoinArtifact } from '../src/chain/contracts/artifacts/index.ts';
import { DEVNET_ROLES, devnetAccount } from '../src/chain/devnet/accounts.ts';
import { startDevnet } from '../src/chain/devnet/run.ts';
import { Submitter } from '../src/chain/devnet/submitter.ts';
import { freshAccount, freePort } from '../test/helpers/devnet.ts';
import { officialPayment, requirementsFor } from '../test/helpers/payments.ts';
import { load, startChild, stopChild } from './load.ts';

const { values: argv } = parseArgs({ options: { seconds: { type: 'string', default: '5' }, concurrency: { type: 'string', default: '64' } } });
const SECONDS = Number(argv.seconds);
const CONCURRENCY = Number(argv.concurrency);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'gate402-bench-'));
  const manifestPath = join(dir, 'devnet.json');
  const ports = { [CAIP2.base]: await freePort(), [CAIP2.baseSepolia]: await freePort(), [CAIP2.stockChain]: await freePort() };
  const devnet = await startDevnet({ manifestPath, host: '127.0.0.1', ports, fresh: true });
  const n = devnet.manifest.networks[CAIP2.base];
  if (!n) throw new Error('no base network');

  // 32 funded payers, 256 distinct signed payloads: verification never consumes a nonce, so they repeat freely.
  const funder = new Submitter(n.chainId, n.rpcUrl, devnetAccount(DEVNET_ROLES.testers[0] as number));
  const payers = Array.from({ length: 32 }, () => freshAccount());
  for (const p of payers) await funder.call(n.stablecoin.address, stablecoinArtifact.abi, 'mint', [p.address, parseUnits('100', 6)]);
  const req = requirementsFor(CAIP2.base, n, freshAccount().address, '10000');
  const bodies = await Promise.all(
    Array.from({ length: 256 }, async (_, i) => JSON.stringify({ x402Version: 2, paymentPayload: await officialPayment(payers[i % payers.length] as (typeof payers)[number], req), paymentRequirements: req })),
  );

  const results: Record<string, unknown> = { machine: { cpus: cpus().length, model: cpus()[0]?.model }, seconds: SECONDS, concurrency: CONCURRENCY };
  for (const simulate of [false, true]) {
    const port = await freePort();
    const child = await startChild([resolve('src/cli/bin.mjs'), 'facilitator', '--manifest', manifestPath], {
      GATE402_FACILITATOR_PORT: String(port),
      GATE402_DATA_DIR: join(dir, `data-${simulate}`),
      GATE402_SIMULATE_ON_VERIFY: String(simulate),
      GATE402_FACILITATOR_RATE_CAPACITY: '1000000',
      GATE402_FACILITATOR_RATE_PER_SECOND: '1000000',
    });
    const verify = (i: number) => ({ url: `http://127.0.0.1:${port}/verify`, method: 'POST' as const, headers: { 'content-type': 'application/json' }, body: bodies[i % bodies.length] as string });
    // Warm-up, untimed: worker threads load and compile, connections open, caches fill.
    await load(verify, 1, CONCURRENCY);
    const row = await load(verify, SECONDS, CONCURRENCY, (status, body) => (status === 200 && (JSON.parse(body) as { isValid?: boolean }).isValid ? 'valid' : `invalid ${status}`));
    results[simulate ? 'simulationOn' : 'simulationOff'] = row;
    process.stdout.write(`/verify, simulation ${simulate ? 'on ' : 'off'}: ${JSON.stringify(row)}\n`);
    await stopChild(child);
  }
  await devnet.stop();
  mkdirSync('bench/results', { recursive: true });
  writeFileSync('bench/results/verify-http.json', JSON.stringify(results, null, 2) + '\n');
}

await main();
