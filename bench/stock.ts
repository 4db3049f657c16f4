/**
 * `npm run bench -- stock`: completed stock orders per second on a fresh devnet, and p50/p99 from the paid request
 * to its answer. Each order is one fresh buyer (funded with stablecoin B, Permit2 approved) buying 1–5 stablecoin B
 * of one of the stocks in turn, paid with the official @x402/evm client scheme against the terms (and signed quote)
 * of a 402 fetched just before the run; the service is `gate402 start` on the devnet manifest, whose stock desk is
 * the devnet's.
 *
 *   node --import tsx bench/stock.ts [--orders N] [--concurrency N]
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { parseUnits, type LocalAccount } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { DEVNET_ROLES, devnetAccount } from '../src/chain/devnet/accounts.ts';
import { startDevnet } from '../src/chain/devnet/run.ts';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '../src/protocol/x402/headers.ts';
import { freePort } from '../test/helpers/devnet.ts';
import { fundedPayer, officialPayment } from '../test/helpers/payments.ts';
import { load, startChild, stopChild } from './load.ts';

const { values: argv } = parseArgs({ options: { orders: { type: 'string', default: '200' }, concurrency: { type: 'string', default: '16' } } });
const ORDERS = Number(argv.orders);
const CONCURRENCY = Number(argv.concurrency);
if (!Number.isInteger(ORDERS) || ORDERS < 1 || !Number.isInteger(CONCURRENCY) || CONCURRENCY < 1) throw new Error('--orders and --concurrency take whole numbers from 1');
/** Funding runs from this many devnet testers at once, each sending its own transactions in turn. */
const FUNDERS = 8;
/** How long the run may take at most: the quotes the 402s carry expire 300 s after they were fetched. */
const RUN_SECONDS = 290;

/** `200 delivered`, `502 refunded (below_slippage_floor)`, ...: the status and the order's state from the body. */
function classify(status: number, body: string): string {
  try {
    const o = JSON.parse(body) as { status?: unknown; failure?: { reason?: unknown } };
    const state = typeof o.status === 'string' ? ` ${o.status}` : '';
    const reason = typeof o.failure?.reason === 'string' ? ` (${o.failure.reason})` : '';
    return `${status}${state}${reason}`;
  } catch {
    return String(status);
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'gate402-bench-stock-'));
  const manifestPath = join(dir, 'devnet.json');
  const ports = { [CAIP2.base]: await freePort(), [CAIP2.baseSepolia]: await freePort(), [CAIP2.stockChain]: await freePort() };
  const devnet = await startDevnet({ manifestPath, host: '127.0.0.1', ports, fresh: true });
  const n = devnet.manifest.networks[CAIP2.stockChain];
  const stocks = n?.stocks ?? [];
  if (!n || stocks.length === 0) throw new Error('the devnet lists no stocks');
  let child: ChildProcess | undefined;
  try {
    const gatewayPort = await freePort();
    child = await startChild([resolve('src/cli/bin.mjs'), 'start', '--manifest', manifestPath], {
      GATE402_GATEWAY_PORT: String(gatewayPort),
      GATE402_FACILITATOR_PORT: String(await freePort()),
      GATE402_DATA_DIR: join(dir, 'data'),
      GATE402_RECEIPT_POLL_MS: '20',
    });
    const base = `http://127.0.0.1:${gatewayPort}/api/stock/buy`;
    const orders = Array.from({ length: ORDERS }, (_, i) => {
      const symbol = (stocks[i % stocks.length] as (typeof stocks)[number]).symbol;
      const amount = 1 + (i % 5);
      return { symbol, amount, url: `${base}?symbol=${symbol}&stable_amount=${amount}` };
    });

    // One fresh buyer per order, funded with exactly its amount; FUNDERS testers fund their shares side by side.
    let t = performance.now();
    const payers: LocalAccount[] = new Array<LocalAccount>(ORDERS);
    await Promise.all(
      Array.from({ length: FUNDERS }, async (_, f) => {
        const funder = devnetAccount(DEVNET_ROLES.testers[f] as number);
        for (let i = f; i < ORDERS; i += FUNDERS) payers[i] = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits(String((orders[i] as (typeof orders)[number]).amount), 6));
      }),
    );
    const fundingSeconds = (performance.now() - t) / 1000;
    process.stdout.write(`funded ${ORDERS} buyers in ${fundingSeconds.toFixed(1)} s\n`);

    // The terms last: each order's 402 (with its signed quote), then its payment signed by its buyer.
    t = performance.now();
    const headers: string[] = [];
    for (const [i, o] of orders.entries()) {
      const res = await request(o.url, { method: 'POST' });
      await res.body.dump();
      const required = decodePaymentRequiredHeader(String(res.headers['payment-required']));
      const offer = required.ok ? required.value.accepts[0] : undefined;
      if (res.statusCode !== 402 || !offer) throw new Error(`${o.url} answered ${res.statusCode} without payment terms`);
      headers.push(encodePaymentSignatureHeader(await officialPayment(payers[i] as LocalAccount, offer)));
    }
    const termsSeconds = (performance.now() - t) / 1000;
    process.stdout.write(`fetched and signed ${ORDERS} orders' terms in ${termsSeconds.toFixed(1)} s\n`);

    const run = await load(
      (i) => (i < ORDERS ? { url: (orders[i] as (typeof orders)[number]).url, method: 'POST', headers: { 'payment-signature': headers[i] as string } } : undefined),
      RUN_SECONDS,
      CONCURRENCY,
      classify,
    );
    const { requestsPerSecond, ...figures } = run;
    const delivered = run.outcomes['200 delivered'] ?? 0;
    const belowSlippageFloor = Object.entries(run.outcomes).reduce((sum, [k, v]) => sum + (k.includes('below_slippage_floor') ? v : 0), 0);
    const results = {
      machine: { cpus: cpus().length, model: cpus()[0]?.model, loadavg: loadavg().map((v) => Number(v.toFixed(2))) },
      network: CAIP2.stockChain,
      blockTime: 'automine',
      orders: ORDERS,
      concurrency: CONCURRENCY,
      stocks: stocks.length,
      stableAmounts: '1-5',
      fundingSeconds: Number(fundingSeconds.toFixed(1)),
      termsSeconds: Number(termsSeconds.toFixed(1)),
      ordersPerSecond: requestsPerSecond,
      delivered,
      belowSlippageFloor,
      ...figures,
    };
    process.stdout.write(`stock orders: ${JSON.stringify(results)}\n`);
    mkdirSync('bench/results', { recursive: true });
    writeFileSync('bench/results/stock.json', JSON.stringify(results, null, 2) + '\n');
  } finally {
    if (child) await stopChild(child);
    await devnet.stop();
  }
}

await main();
