/**
 * `npm run bench -- stock`: completed stock orders per second on the devnet, and p50/p99 from the paid request
 * to its answer. Each order is one fresh buyer (funded with stablecoin B, Permit2 approved) buying 1–5 stablecoin B
 * of one of the stocks in turn, paid with the official @x402/evm client scheme against the terms (and signed quote)
 * of a 402 fetched just before the run; the service is `gate402 start` on the devnet manifest, whose stock desk is
 * the devnet's.
 *
 *   node --import tsx bench/stock.ts [--orders N] [--concurrency N]
 */
import { parseUnits, type LocalAccount } from 'viem';
import { request } from 'undici';
import { CAIP2 } from '../src/chain/canonical.ts';
import { devnetAccount } from '../src/devnet/accounts.ts';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '../src/protocol/x402/headers.ts';
import { fundedPayer, officialPayment } from '../test/helpers/payments.ts';
import { BENCH_FUNDERS, benchDevnet, networkOf } from './devnet.ts';
import { load } from './load.ts';
import { benchOptions } from './options.ts';
import { progress, writeFigures } from './report.ts';
import { startGate402, type Server } from './stacks.ts';

const opts = benchOptions({
  full: { orders: '200', concurrency: '16' },
  quick: { orders: '30', concurrency: '8' },
  tiny: { orders: '3', concurrency: '2' },
});
const ORDERS = opts.number('orders');
const CONCURRENCY = opts.number('concurrency');
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
  const devnet = await benchDevnet(opts.manifest);
  const n = networkOf(devnet.manifest, CAIP2.stockChain);
  const stocks = n.stocks ?? [];
  if (stocks.length === 0) throw new Error('the devnet lists no stocks');
  progress('devnet up');
  let gate402: Server | undefined;
  try {
    gate402 = await startGate402(devnet.manifestPath, { pollMs: 20 });
    const base = `${new URL(gate402.url).origin}/api/stock/buy`;
    const orders = Array.from({ length: ORDERS }, (_, i) => {
      const symbol = (stocks[i % stocks.length] as (typeof stocks)[number]).symbol;
      const amount = 1 + (i % 5);
      return { symbol, amount, url: `${base}?symbol=${symbol}&stable_amount=${amount}` };
    });

    // One fresh buyer per order, funded with exactly its amount; the bench's funders fund their shares side by side.
    let t = performance.now();
    const payers: LocalAccount[] = new Array<LocalAccount>(ORDERS);
    await Promise.all(
      BENCH_FUNDERS.map(async (index, f) => {
        const funder = devnetAccount(index);
        for (let i = f; i < ORDERS; i += BENCH_FUNDERS.length) payers[i] = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits(String((orders[i] as (typeof orders)[number]).amount), 6));
      }),
    );
    const fundingSeconds = (performance.now() - t) / 1000;
    progress(`funded ${ORDERS} buyers in ${fundingSeconds.toFixed(1)} s`);

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
    progress(`fetched and signed ${ORDERS} orders' terms in ${termsSeconds.toFixed(1)} s`);

    const run = await load(
      (i) => (i < ORDERS ? { url: (orders[i] as (typeof orders)[number]).url, method: 'POST', headers: { 'payment-signature': headers[i] as string } } : undefined),
      RUN_SECONDS,
      CONCURRENCY,
      classify,
    );
    const { requestsPerSecond, ...figures } = run;
    const delivered = run.outcomes['200 delivered'] ?? 0;
    const belowSlippageFloor = Object.entries(run.outcomes).reduce((sum, [k, v]) => sum + (k.includes('below_slippage_floor') ? v : 0), 0);
    const stock = {
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
    progress(`${requestsPerSecond} orders/s, ${delivered} of ${ORDERS} delivered`);
    writeFigures(opts.out, { stock });
  } finally {
    await gate402?.stop();
    await devnet.stop();
  }
}

await main();
