import t from 'tap';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { validateDiscoveryExtension, type DiscoveryExtension } from '@x402/extensions/bazaar';
import { formatUnits, maxUint256, parseUnits, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2, PERMIT2_ADDRESS } from '../src/chain/canonical.ts';
import { stablecoinArtifact } from '../src/devnet/contracts/artifacts/index.ts';
import { uniswapArtifacts } from '../src/devnet/contracts/uniswap.ts';
import { clientsFor, network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { fundedPayer, postJson, stableBalance } from './helpers/payments.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';
import { scrape, valueOf as metricValue } from './helpers/prometheus.ts';
import { buyInPool, gassedKey, officialBuyer, tokenBalance } from './helpers/stock.ts';
import { sharePriceFromSlot0, sharePriceFromTick } from './helpers/pool-price.ts';
import { poolsOf } from './helpers/stock-pools.ts';

const manifest = testDevnet();
const n = network(manifest, CAIP2.stockChain);
const funder = tester('stock');
const stocks = n.stocks ?? [];
const tsla = stocks.find((s) => s.symbol === 'TSLA');
if (!tsla || !n.uniswap) throw new Error('the devnet lists no TSLA pool');

const deskKey = await gassedKey(n);
const desk = privateKeyToAccount(deskKey).address;
const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: TEST_MANIFEST_PATH,
  env: {
    GATE402_STOCK_ENABLED: 'true',
    GATE402_STOCK_DESK_KEY: deskKey,
    GATE402_RELAYER_KEYS: await gassedKey(n),
    GATE402_CONFIRM_DEADLINE_MS: '30000',
    // A settlement queue of one payment: concurrent buys meet its backpressure on any machine (as buys on a loaded one
    // meet the default queue's wait bound), and must wait for their turn, not be rejected; a buy answers once its
    // order is over, within 2 minutes.
    GATE402_SETTLE_QUEUE_MAX: '1',
    GATE402_STOCK_ORDER_WAIT_MS: '120000',
  },
});
t.teardown(() => gw.stop());

type Order = {
  orderId: string;
  status: string;
  symbol: string;
  payer: Address;
  recipient: Address;
  stableAmount: string;
  delivered?: string;
  deliveredAtomic?: string;
  settlementTx?: string;
  swapTx?: string;
  refundTx?: string;
  failure?: { reason: string };
  createdAt: string;
};

async function buy(pay: typeof fetch, query: string): Promise<{ status: number; body: Order & { error?: string }; paymentResponse: string | null }> {
  const res = await pay(`${gw.url}/api/stock/buy?${query}`, { method: 'POST' });
  return { status: res.status, body: (await res.json()) as Order & { error?: string }, paymentResponse: res.headers.get('payment-response') };
}

t.test('stock list and quote', async (t) => {
  const { pub } = clientsFor(n, funder);
  // TSLA's price is worked out here from the pool's own slot0, read before and after the list (no other file trades on TSLA).
  const slot0 = () => pub.readContract({ address: tsla.pool, abi: uniswapArtifacts.pool.abi, functionName: 'slot0' }) as Promise<readonly [bigint, number, ...unknown[]]>;
  const [sqrtPriceX96, tick] = await slot0();
  const list = (await (await fetch(`${gw.url}/api/stock/list`)).json()) as {
    stocks: Array<{ symbol: string; address: string; priceUsd: string; fees: { amount: string }; limits: { minStableAmount: string; maxStableAmount: string } }>;
  };
  t.equal(list.stocks.length, 14, 'fourteen stocks');
  const row = list.stocks.find((s) => s.symbol === 'TSLA');
  t.equal(row?.address, tsla.address, 'TSLA at its token address');
  t.match(row?.priceUsd, /^\d+\.\d{6}$/, 'a live price in USD');
  t.equal((await slot0())[0], sqrtPriceX96, 'the pool did not move meanwhile');
  const price = sharePriceFromSlot0(sqrtPriceX96, n.stablecoin.address, tsla.address, tsla.decimals);
  t.equal(BigInt(row?.priceUsd?.replace('.', '') ?? -1), price, `TSLA's price is the pool's slot0 price, ${formatUnits(price, 6)}`);
  const byTick = sharePriceFromTick(tick, n.stablecoin.address, tsla.address, tsla.decimals);
  t.ok(Math.abs(byTick - Number(price)) / Number(price) < 2e-4, `and agrees with the tick's price (${byTick / 1e6})`);
  t.same([row?.fees.amount, row?.limits.minStableAmount, row?.limits.maxStableAmount], ['0.000000', '1.000000', '1000.000000'], 'zero fees, limits 1 to 1000');
  const q = (await (await fetch(`${gw.url}/api/stock/quote?symbol=TSLA&stable_amount=5`)).json()) as { estimatedSharesAtomic: string; total: { atomic: string } };
  const { result } = await pub.simulateContract({
    address: n.uniswap!.quoter,
    abi: uniswapArtifacts.quoterV2.abi,
    functionName: 'quoteExactInputSingle',
    args: [{ tokenIn: n.stablecoin.address, tokenOut: tsla.address, amountIn: 5_000_000n, fee: tsla.fee, sqrtPriceLimitX96: 0n }],
  });
  t.equal(q.estimatedSharesAtomic, (result as readonly [bigint])[0].toString(), 'the quote is QuoterV2 on chain');
  t.equal(q.total.atomic, '5000000', 'the total is exactly the amount (fees are zero)');
});

t.test('bad input is refused before any payment is asked for', async (t) => {
  const cases: Array<[string, number]> = [
    ['symbol=TSLA&stable_amount=0', 400],
    ['symbol=TSLA&stable_amount=0.5', 400],
    ['symbol=TSLA&stable_amount=1000.000001', 400],
    ['symbol=TSLA&stable_amount=-1', 400],
    ['symbol=TSLA&stable_amount=abc', 400],
    ['symbol=TSLA', 400],
    ['symbol=NOPE&stable_amount=5', 404],
    ['symbol=TSLA&stable_amount=5&recipient=0x1234', 400],
    ['symbol=TSLA&stable_amount=5&recipient=0xAbCdEf0123456789aBcDeF0123456789AbCdEf01', 400],
  ];
  for (const [query, status] of cases) {
    const res = await fetch(`${gw.url}/api/stock/buy?${query}`, { method: 'POST' });
    const body = (await res.json()) as { error?: string };
    t.equal(res.status, status, `${query}: ${status}`);
    t.equal(res.headers.get('payment-required'), null, `${query}: no payment asked for`);
    t.type(body.error, 'string', `${query}: says why (${body.error})`);
  }
});

t.test("the buy's 402 declares how it is called, as x402 bazaar clients read it", async (t) => {
  const res = await fetch(`${gw.url}/api/stock/buy?symbol=TSLA&stable_amount=5`, { method: 'POST' });
  t.equal(res.status, 402);
  const required = decodePaymentRequiredHeader(res.headers.get('payment-required') as string);
  const bazaar = required.extensions?.bazaar as DiscoveryExtension;
  t.same(validateDiscoveryExtension(bazaar), { valid: true }, 'its info satisfies its schema');
  t.match(bazaar.info.input, { type: 'http', method: 'POST', queryParams: { symbol: 'TSLA', stable_amount: 1 } });
});

t.test('the gasless buyer: sponsorship, one approval, then the official client buys TSLA for 5 stablecoin B', async (t) => {
  const buyerEntry = manifest.accounts.buyers.find((b) => b.gasless);
  if (!buyerEntry?.privateKey) throw new Error('no gasless buyer in the manifest');
  const buyer = privateKeyToAccount(buyerEntry.privateKey);
  const { pub, wallet } = clientsFor(n, buyer);
  t.equal(await pub.getBalance({ address: buyer.address }), 0n, 'the gasless buyer starts with no gas');

  const sponsored = await postJson(`${gw.url}/api/gas/sponsor`, { address: buyer.address });
  t.equal(sponsored.status, 200, 'sponsored');
  const gas = await pub.getBalance({ address: buyer.address });
  t.equal(gas.toString(), (sponsored.json as { amountWei: string }).amountWei, 'received exactly the sponsored amount');

  const approval = await wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
  t.equal((await pub.waitForTransactionReceipt({ hash: approval })).status, 'success', 'the one approval goes through on sponsored gas');
  t.ok((await pub.getBalance({ address: buyer.address })) < gas, 'and spent it');

  const deskNonce = await pub.getTransactionCount({ address: desk });
  const balanceBefore = await pub.getBalance({ address: buyer.address });
  const again = await postJson(`${gw.url}/api/gas/sponsor`, { address: buyer.address });
  t.equal(again.status, 409, 'a second sponsorship is refused');
  t.equal((again.json as { condition: string }).condition, 'already_sponsored', 'saying why');
  t.equal(await pub.getTransactionCount({ address: desk }), deskNonce, 'and nothing is sent');
  t.equal(await pub.getBalance({ address: buyer.address }), balanceBefore, 'the buyer received nothing more');

  const stableBefore = await stableBalance(n, buyer.address);
  const sharesBefore = await tokenBalance(n, tsla.address, buyer.address);
  const { status, body, paymentResponse } = await buy(officialBuyer(buyer), 'symbol=TSLA&stable_amount=5');
  t.equal(status, 200, `bought (${body.error ?? body.status})`);
  t.equal(body.status, 'delivered');
  t.equal((await tokenBalance(n, tsla.address, buyer.address)) - sharesBefore, BigInt(body.deliveredAtomic ?? -1), 'the TSLA balance rose by exactly the delivered amount');
  t.equal(stableBefore - (await stableBalance(n, buyer.address)), 5_000_000n, '5 stablecoin B left the buyer');
  const settled = decodePaymentResponseHeader(paymentResponse ?? '');
  t.equal(settled.success, true, 'PAYMENT-RESPONSE decodes');
  t.equal(settled.transaction, body.settlementTx, 'naming the settlement transaction');
  const swap = await pub.getTransactionReceipt({ hash: body.swapTx as `0x${string}` });
  t.equal(swap.status, 'success', 'the swap transaction is on chain');
  const record = (await (await fetch(`${gw.url}/api/stock/order/${body.orderId}`)).json()) as Order;
  t.same([record.status, record.deliveredAtomic, record.swapTx], ['delivered', body.deliveredAtomic, body.swapTx], 'the order record agrees');
});

t.test('a buy to another recipient delivers there', async (t) => {
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('10', 6));
  const recipient = privateKeyToAccount(await gassedKey(n, '0')).address;
  const { status, body } = await buy(officialBuyer(payer), `symbol=AAPL&stable_amount=2.5&recipient=${recipient}`);
  t.equal(status, 200, `bought (${body.error ?? body.status})`);
  const aapl = stocks.find((s) => s.symbol === 'AAPL')!;
  t.equal(await tokenBalance(n, aapl.address, recipient), BigInt(body.deliveredAtomic ?? -1), 'the recipient holds exactly what was delivered');
  t.equal(await tokenBalance(n, aapl.address, payer.address), 0n, 'the payer holds none');
});

t.test('the price moves against the order between quote and swap: 502 with a refund, balance restored', async (t) => {
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('50', 6));
  const before = await stableBalance(n, payer.address);
  const { pub } = clientsFor(n, funder);
  const moveMarket = async () => {
    t.equal((await buyInPool(n, funder, tsla, parseUnits('400000', 6))).status, 'success', 'a trader buys TSLA in size after the 402');
  };
  const { status, body, paymentResponse } = await buy(officialBuyer(payer, moveMarket), 'symbol=TSLA&stable_amount=20');
  t.equal(status, 502, 'delivery failed');
  t.equal(body.status, 'refunded');
  t.equal(body.failure?.reason, 'below_slippage_floor', 'because the re-quote fell below the floor');
  t.match(body.refundTx, /^0x[0-9a-f]{64}$/, 'the body names the refund transaction');
  t.equal((await pub.getTransactionReceipt({ hash: body.refundTx as `0x${string}` })).status, 'success', 'which is on chain');
  t.ok(decodePaymentResponseHeader(paymentResponse ?? '').success, 'the payment had settled');
  t.equal(await stableBalance(n, payer.address), before, "the buyer's stablecoin B balance is restored");
  t.equal(await tokenBalance(n, tsla.address, payer.address), 0n, 'and no stock was delivered');
});

t.test('20 concurrent buys by different buyers all complete, those the settlement queue turned away included; the feed lists them newest first', async (t) => {
  const shedBefore = metricValue(await scrape(`${gw.url}/metrics`), 'gate402_payments_shed_total', { network: CAIP2.stockChain, reason: 'queue_full' }) ?? 0;
  const buyers = [];
  for (let i = 0; i < 20; i++) buyers.push(await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('5', 6)));
  const mine = poolsOf(n, 'stockBuy');
  const results = await Promise.all(buyers.map((b, i) => buy(officialBuyer(b), `symbol=${mine[i % mine.length]!.symbol}&stable_amount=${1 + (i % 4)}`)));
  t.same(
    results.map((r) => r.status),
    Array(20).fill(200),
    `all 200: ${JSON.stringify(results.filter((r) => r.status !== 200).map((r) => ({ status: r.status, state: r.body.status, failure: r.body.failure })))}`,
  );
  const shed = (metricValue(await scrape(`${gw.url}/metrics`), 'gate402_payments_shed_total', { network: CAIP2.stockChain, reason: 'queue_full' }) ?? 0) - shedBefore;
  t.ok(shed > 0, `the queue of one turned settlements away ${shed} times, and their orders waited and were delivered`);
  for (const [i, r] of results.entries()) {
    const record = (await (await fetch(`${gw.url}/api/stock/order/${r.body.orderId}`)).json()) as Order;
    const stock = mine[i % mine.length]!;
    const held = await tokenBalance(n, stock.address, buyers[i]!.address);
    if (record.status !== 'delivered' || record.deliveredAtomic !== held.toString() || record.payer.toLowerCase() !== buyers[i]!.address.toLowerCase()) {
      t.fail(`order ${i} is inconsistent: ${JSON.stringify(record)} holds ${held}`);
    }
  }
  t.pass('every record is delivered, names its payer, and its delivered amount is what the buyer holds');
  const feed = (await (await fetch(`${gw.url}/api/stock/orders?limit=100`)).json()) as { orders: Order[] };
  const ids = new Set(results.map((r) => r.body.orderId));
  t.equal(feed.orders.filter((o) => ids.has(o.orderId)).length, 20, 'the global feed lists all 20');
  const times = feed.orders.map((o) => Date.parse(o.createdAt));
  t.ok(
    times.every((v, i) => i === 0 || v <= (times[i - 1] as number)),
    'newest first',
  );
  const own = (await (await fetch(`${gw.url}/api/stock/orders?payer=${buyers[3]!.address}`)).json()) as { orders: Order[] };
  t.same(
    own.orders.map((o) => o.orderId),
    [results[3]!.body.orderId],
    "a payer's history holds its own order only",
  );
  t.equal((await fetch(`${gw.url}/api/stock/orders?limit=0`)).status, 400, 'a bad limit is a 400');
  t.equal((await fetch(`${gw.url}/api/stock/order/nope`)).status, 404, 'an unknown order is a 404');
});

t.test('/metrics counts the orders, the refund and the sponsorship', async (t) => {
  const m = await scrape(`${gw.url}/metrics`);
  t.ok((metricValue(m, 'gate402_stock_orders_total', { symbol: 'TSLA', outcome: 'delivered' }) ?? 0) >= 1, 'delivered TSLA orders');
  t.equal(metricValue(m, 'gate402_stock_orders_total', { symbol: 'TSLA', outcome: 'refunded' }), 1, 'the refunded order');
  t.equal(metricValue(m, 'gate402_stock_refunds_total', { reason: 'below_slippage_floor' }), 1, 'its refund, by reason');
  t.equal(metricValue(m, 'gate402_stock_sponsorships_total', { outcome: 'sent' }), 1, 'one sponsorship sent');
  t.equal(metricValue(m, 'gate402_stock_sponsorships_total', { outcome: 'already_sponsored' }), 1, 'one refused');
  t.ok((metricValue(m, 'gate402_actor_transitions_total', { machine: 'order', from: 'swapping', to: 'confirmingSwap' }) ?? 0) >= 20, 'order actor transitions');
  t.ok((metricValue(m, 'gate402_stock_order_volume_usd_total', { symbol: 'TSLA' }) ?? 0) >= 5, 'volume in USD');
});
