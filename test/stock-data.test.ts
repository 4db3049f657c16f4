/**
 * `chain-stocks` served from gate402's own stock data: a gateway with the stock API on answers the marketplace's
 * stock routes from the stock chain, paid with the official x402 client. Every answer names the block it was read
 * at; the test reads the pools and QuoterV2 at that block itself and expects the same figures. Input that names no
 * stock is refused before the payment settles.
 */
import t from 'tap';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { erc20Abi, parseUnits, type Address } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { uniswapArtifacts } from '../src/devnet/contracts/uniswap.ts';
import type { StockInfo } from '../src/chain/network-types.ts';
import { formatDecimalAmount, USD_DECIMALS } from '../src/protocol/amounts.ts';
import { clientsFor, network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';
import { gassedKey, officialBuyer } from './helpers/stock.ts';
import { sharePriceFromSlot0 } from './helpers/pool-price.ts';

const manifest = testDevnet();
const n = network(manifest, CAIP2.stockChain);
const stocks = n.stocks ?? [];
const tsla = stocks.find((s) => s.symbol === 'TSLA');
const aapl = stocks.find((s) => s.symbol === 'AAPL');
if (!tsla || !aapl || !n.uniswap) throw new Error('the devnet lists no TSLA or AAPL pool');
const quoter = n.uniswap.quoter;

const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: TEST_MANIFEST_PATH,
  env: { GATE402_STOCK_ENABLED: 'true', GATE402_STOCK_DESK_KEY: await gassedKey(n), GATE402_RELAYER_KEYS: await gassedKey(n), GATE402_CONFIRM_DEADLINE_MS: '30000' },
});
t.teardown(() => gw.stop());

const { pub } = clientsFor(n, tester('stockData'));
const payer = await fundedPayer(n, CAIP2.stockChain, tester('stockData'), parseUnits('5', 6));
const pay = officialBuyer(payer);
const usd = (atomic: bigint) => formatDecimalAmount(atomic, USD_DECIMALS);

/** The pool's price at `blockNumber`, from its slot0 with this suite's own arithmetic (not the code under test). */
async function poolPrice(s: StockInfo, blockNumber: bigint): Promise<bigint> {
  const slot0 = (await pub.readContract({ address: s.pool, abi: uniswapArtifacts.pool.abi, functionName: 'slot0', blockNumber })) as readonly [bigint, ...unknown[]];
  return sharePriceFromSlot0(slot0[0], n.stablecoin.address, s.address, s.decimals);
}

async function balanceAt(token: Address, owner: Address, blockNumber: bigint): Promise<bigint> {
  return pub.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [owner], blockNumber });
}

type Paid = { status: number; body: Record<string, unknown>; contentType: string | null; paymentResponse: string | null };

async function paid(path: string, init?: RequestInit): Promise<Paid> {
  const res = await pay(`${gw.url}${path}`, init);
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, contentType: res.headers.get('content-type'), paymentResponse: res.headers.get('payment-response') };
}

t.test('still a paid marketplace merchant, discovered as before', async (t) => {
  const unpaid = await fetch(`${gw.url}/m/chain-stocks/quote?symbol=TSLA`);
  t.equal(unpaid.status, 402, 'a 402 without payment');
  t.ok(unpaid.headers.get('payment-required'), 'with the x402 offers');
  const index = (await (await fetch(`${gw.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
  t.same(
    Object.keys(index.paths)
      .filter((p) => p.startsWith('/m/chain-stocks/'))
      .sort(),
    ['/m/chain-stocks/quote', '/m/chain-stocks/report', '/m/chain-stocks/stocks', '/m/chain-stocks/token'],
  );
  const listing = await (await fetch(`${gw.url}/api/merchants/chain-stocks`)).text();
  t.same((JSON.parse(listing) as { merchant: { upstream: unknown } }).merchant.upstream, { kind: 'url' }, 'the public view does not say how it is served');
  t.notMatch(listing, /internal|stock-data/);
});

t.test('a paid TSLA quote is the pool price and QuoterV2 at the block it names', async (t) => {
  const before = await stableBalance(n, payer.address);
  const { status, body, contentType, paymentResponse } = await paid('/m/chain-stocks/quote?symbol=TSLA');
  t.equal(status, 200, JSON.stringify(body));
  t.match(contentType, /^application\/json/);
  t.equal(decodePaymentResponseHeader(paymentResponse ?? '').success, true, 'PAYMENT-RESPONSE: settled');
  t.equal(before - (await stableBalance(n, payer.address)), 10_000n, 'the route price, 0.01 stablecoin B, was paid');
  t.same([body.symbol, body.address, body.pool, body.network], ['TSLA', tsla.address, tsla.pool, CAIP2.stockChain]);
  const block = BigInt(body.blockNumber as string);
  t.equal(body.priceUsd, usd(await poolPrice(tsla, block)), 'priceUsd is the pool price');
  const { result } = await pub.simulateContract({
    address: quoter,
    abi: uniswapArtifacts.quoterV2.abi,
    functionName: 'quoteExactInputSingle',
    args: [{ tokenIn: n.stablecoin.address, tokenOut: tsla.address, amountIn: 1_000_000n, fee: tsla.fee, sqrtPriceLimitX96: 0n }],
    blockNumber: block,
  });
  const buy = body.buy as { stableAmount: string; estimatedSharesAtomic: string };
  t.same([buy.stableAmount, buy.estimatedSharesAtomic], ['1.000000', (result as readonly [bigint])[0].toString()], 'what 1 stablecoin B buys is QuoterV2 on chain');
});

t.test('a paid token answer, asked by POST body, is the chain’s supply and reserves', async (t) => {
  const { status, body } = await paid('/m/chain-stocks/token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ symbol: 'aapl' }) });
  t.equal(status, 200, JSON.stringify(body));
  t.same([body.symbol, body.address], ['AAPL', aapl.address]);
  const block = BigInt(body.blockNumber as string);
  const supply = await pub.readContract({ address: aapl.address, abi: erc20Abi, functionName: 'totalSupply', blockNumber: block });
  t.equal(body.totalSupplyAtomic, supply.toString(), 'total supply');
  const reserves = body.reserves as { stockAtomic: string; stableAtomic: string };
  t.same(
    [reserves.stockAtomic, reserves.stableAtomic],
    [(await balanceAt(aapl.address, aapl.pool, block)).toString(), (await balanceAt(n.stablecoin.address, aapl.pool, block)).toString()],
    'pool reserves',
  );
});

t.test('the paid stock list: every listed stock at its pool price', async (t) => {
  const { status, body } = await paid('/m/chain-stocks/stocks');
  t.equal(status, 200, JSON.stringify(body));
  const rows = body.stocks as Array<{ symbol: string; address: string; priceUsd: string }>;
  t.same(
    rows.map((r) => [r.symbol, r.address]),
    stocks.map((s) => [s.symbol, s.address]),
    `all ${stocks.length} stocks`,
  );
  const block = BigInt(body.blockNumber as string);
  const prices = await Promise.all(stocks.map((s) => poolPrice(s, block)));
  t.same(
    rows.map((r) => r.priceUsd),
    prices.map(usd),
    'live prices, as the pools say',
  );
});

t.test('the paid report sums the pools', async (t) => {
  const { status, body } = await paid('/m/chain-stocks/report', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"window":"7d"}' });
  t.equal(status, 200, JSON.stringify(body));
  const pools = body.pools as Array<{ symbol: string; reserves: { stableAtomic: string }; liquidityUsd: string }>;
  t.equal(pools.length, stocks.length);
  const block = BigInt(body.blockNumber as string);
  const tslaRow = pools.find((p) => p.symbol === 'TSLA')!;
  t.equal(tslaRow.reserves.stableAtomic, (await balanceAt(n.stablecoin.address, tsla.pool, block)).toString(), 'the TSLA pool holds what the chain says');
  const atomic = (v: string) => BigInt(v.replace('.', ''));
  t.equal(
    atomic(body.totalLiquidityUsd as string),
    pools.reduce((sum, p) => sum + atomic(p.liquidityUsd), 0n),
    'the total is the sum of the pools',
  );
});

t.test('input that names no stock is refused before the payment settles', async (t) => {
  const unpaid = await fetch(`${gw.url}/m/chain-stocks/quote?symbol=NOPE`);
  t.equal(unpaid.status, 402, 'unpaid, it is a 402 like every paid route');
  const cases: Array<[string, RequestInit | undefined, number]> = [
    ['/m/chain-stocks/quote?symbol=NOPE', undefined, 404],
    ['/m/chain-stocks/token?address=0x000000000000000000000000000000000000dEaD', undefined, 404],
    ['/m/chain-stocks/quote?address=0x1234', undefined, 400],
    ['/m/chain-stocks/quote', undefined, 400],
    ['/m/chain-stocks/quote', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"symbol":"TSLA","extra":1}' }, 400],
    ['/m/chain-stocks/stocks', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"symbol":"TSLA"}' }, 400],
  ];
  for (const [path, init, want] of cases) {
    const before = await stableBalance(n, payer.address);
    const { status, body, contentType, paymentResponse } = await paid(path, init);
    const label = `${init?.method ?? 'GET'} ${path} ${init?.body ?? ''}`;
    t.equal(status, want, `${label}: ${want}`);
    t.match(contentType, /^application\/json/, `${label}: JSON`);
    t.match(body.error, /nothing was charged$/, `${label}: says why (${body.error as string})`);
    t.equal(paymentResponse, null, `${label}: no settlement`);
    t.equal(await stableBalance(n, payer.address), before, `${label}: the payer paid nothing`);
  }
});
