/**
 * `npm run bench -- gateway`: in one run on this machine,
 *  1. 402 challenges per second from gate402's gateway, a bare uWebSockets.js hello-world, and the official
 *     @x402/express paywall serving the same route (each server its own process, warmed up for a second first;
 *     the load from `wrk` when it is installed, else from this process, see load.ts);
 *  2. paid requests per second end to end on the devnet (verify, settle, forward to a local upstream), p50/p99.
 *
 *   node --import tsx bench/gateway.ts [--seconds N] [--concurrency N] [--paid N]
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { parseUnits } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { stablecoinArtifact } from '../src/chain/contracts/artifacts/index.ts';
import { DEVNET_ROLES, devnetAccount } from '../src/chain/devnet/accounts.ts';
import { startDevnet } from '../src/chain/devnet/run.ts';
import { Submitter } from '../src/chain/devnet/submitter.ts';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '../src/protocol/x402/headers.ts';
import { freshAccount, freePort } from '../test/helpers/devnet.ts';
import { officialPayment } from '../test/helpers/payments.ts';
import { load, startChild, stopChild } from './load.ts';

const { values: argv } = parseArgs({ options: { seconds: { type: 'string', default: '5' }, concurrency: { type: 'string', default: '64' }, paid: { type: 'string', default: '400' } } });
const SECONDS = Number(argv.seconds);
const CONCURRENCY = Number(argv.concurrency);
const PAID = Number(argv.paid);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'gate402-bench-gw-'));
  const manifestPath = join(dir, 'devnet.json');
  const ports = { [CAIP2.base]: await freePort(), [CAIP2.baseSepolia]: await freePort(), [CAIP2.stockChain]: await freePort() };
  const devnet = await startDevnet({ manifestPath, host: '127.0.0.1', ports, fresh: true });
  const n = devnet.manifest.networks[CAIP2.base];
  if (!n) throw new Error('no base network');
  const children: ChildProcess[] = [];
  try {
    const gatewayPort = await freePort();
    const facilitatorPort = await freePort();
    // `start` on a live manifest reuses the chains: facilitator and gateway in one process, on one engine.
    children.push(
      await startChild([resolve('src/cli/bin.mjs'), 'start', '--manifest', manifestPath], {
        GATE402_GATEWAY_PORT: String(gatewayPort),
        GATE402_FACILITATOR_PORT: String(facilitatorPort),
        GATE402_DATA_DIR: join(dir, 'data'),
        GATE402_FACILITATOR_RATE_CAPACITY: '1000000',
        GATE402_FACILITATOR_RATE_PER_SECOND: '1000000',
        GATE402_RECEIPT_POLL_MS: '20',
      }),
    );
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}/m/catjoke/joke`;
    const first = await request(gatewayUrl);
    await first.body.dump();
    const required = decodePaymentRequiredHeader(String(first.headers['payment-required']));
    const offer = required.ok ? required.value.accepts.find((o) => o.network === CAIP2.base) : undefined;
    if (!offer) throw new Error('the gateway offered no eip155:8453 payment');

    const barePort = await freePort();
    children.push(await startChild([resolve('bench/peers/bare-uws.mjs'), String(barePort)]));
    const expressPort = await freePort();
    children.push(
      await startChild(['--import', 'tsx', resolve('bench/peers/express-paywall.ts'), String(expressPort), `http://127.0.0.1:${facilitatorPort}`, CAIP2.base, n.stablecoin.address, offer.payTo, n.stablecoin.name, n.stablecoin.version]),
    );

    const results: Record<string, unknown> = { machine: { cpus: cpus().length, model: cpus()[0]?.model }, seconds: SECONDS, concurrency: CONCURRENCY };
    const challengeRate = async (url: string) => {
      await load({ url }, 1, CONCURRENCY); // warm-up, untimed: JIT, connections
      return load({ url }, SECONDS, CONCURRENCY);
    };
    const challenge = {
      gate402: await challengeRate(gatewayUrl),
      bareUws: await challengeRate(`http://127.0.0.1:${barePort}/m/catjoke/joke`),
      x402Express: await challengeRate(`http://127.0.0.1:${expressPort}/m/catjoke/joke`),
    };
    results['challenge'] = {
      ...challenge,
      gate402VsBareUws: Number((challenge.gate402.requestsPerSecond / challenge.bareUws.requestsPerSecond).toFixed(2)),
      gate402VsX402Express: Number((challenge.gate402.requestsPerSecond / challenge.x402Express.requestsPerSecond).toFixed(2)),
    };
    process.stdout.write(`402 challenges: ${JSON.stringify(results['challenge'])}\n`);

    // Paid end to end: pre-signed EIP-3009 payments on eip155:8453 from funded buyers, each used once.
    const funder = new Submitter(n.chainId, n.rpcUrl, devnetAccount(DEVNET_ROLES.testers[0] as number));
    const payers = Array.from({ length: 16 }, () => freshAccount());
    for (const p of payers) await funder.call(n.stablecoin.address, stablecoinArtifact.abi, 'mint', [p.address, parseUnits('100', 6)]);
    const headers: string[] = [];
    for (let i = 0; i < PAID; i++) {
      const payer = payers[i % payers.length] as (typeof payers)[number];
      headers.push(encodePaymentSignatureHeader(await officialPayment(payer, offer)));
    }
    const paid = await load((i) => (i < headers.length ? { url: gatewayUrl, headers: { 'payment-signature': headers[i] as string } } : undefined), 60, Math.min(CONCURRENCY, 32));
    results['paid'] = { network: CAIP2.base, blockTime: 'automine', payments: headers.length, ...paid };
    process.stdout.write(`paid end to end: ${JSON.stringify(results['paid'])}\n`);
    mkdirSync('bench/results', { recursive: true });
    writeFileSync('bench/results/gateway.json', JSON.stringify(results, null, 2) + '\n');
  } finally {
    for (const c of children) await stopChild(c);
    await devnet.stop();
  }
}

await main();
