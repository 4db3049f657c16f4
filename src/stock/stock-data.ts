/**
 * `chain-stocks`, the marketplace's built-in stock data merchant, served inside the gateway (`Upstream` kind
 * `internal`, name `stock-data`) from the stock chain gate402 sells on: the routes quote, token, stocks and report
 * of spec 4.1.
 *
 * A request's input is checked before its payment settles, without touching the chain: one that can only be refused
 * (400 bad input, 404 no such stock) is refused then, and nothing is charged. Once paid, every figure of an answer
 * is read at one block, which the answer names (`blockNumber`), so that it can be checked against the chain.
 */
import type { StockInfo } from '../chain/network-types.ts';
import { JSON_CONTENT_TYPE } from '../http/server.ts';
import { upstreamFailed, type UpstreamPort, type UpstreamRequest, type UpstreamResult } from '../ports/upstream.ts';
import { formatDecimalAmount, USD_DECIMALS } from '../protocol/amounts.ts';
import { ok } from '../protocol/result.ts';
import { parseJsonBytes } from '../protocol/x402/codec.ts';
import type { StockMarket } from './market.ts';
import { bad, findStock, ORDER_LIMITS, parseAddress, stockListing, type Checked } from './terms.ts';

export interface StockDataOptions {
  market: StockMarket;
  /** The desk's slippage bound, shown in the list as `GET /api/stock/list` shows it. */
  slippageBps: number;
  now(): number;
}

/** An answer once paid: the JSON body, read from the chain at `block`. */
type Answer = (block: bigint) => Promise<Record<string, unknown>>;

/** What the quote's reference buy spends: the smallest order, 1 stablecoin B. */
const REFERENCE_BUY = ORDER_LIMITS.min;
const usd = (atomic: bigint) => formatDecimalAmount(atomic, USD_DECIMALS);
const good = ok;

/** The `stock-data` upstream: checks a request's input now, and answers it from the chain once it is paid. */
export function stockData(o: StockDataOptions): UpstreamPort {
  const market = o.market;
  const network = market.network;
  const stocks = market.stocks;

  const facts = (s: StockInfo) => ({ symbol: s.symbol, name: s.name, address: s.address, decimals: s.decimals, network: network.caip2, pool: s.pool, poolFee: s.fee });

  async function reserves(s: StockInfo, block: bigint) {
    const [price, stock, stable] = await Promise.all([market.livePrice(s, block), market.balanceOf(s.address, s.pool, block), market.balanceOf(market.stable, s.pool, block)]);
    const liquidity = stable + (stock * price) / 10n ** BigInt(s.decimals);
    return {
      price,
      liquidity,
      view: { stock: formatDecimalAmount(stock, s.decimals), stockAtomic: stock.toString(), stable: usd(stable), stableAtomic: stable.toString() },
    };
  }

  const quote =
    (s: StockInfo): Answer =>
    async (block) => {
      const [price, shares] = await Promise.all([market.livePrice(s, block), market.quote(s, REFERENCE_BUY, block)]);
      return {
        ...facts(s),
        priceUsd: usd(price),
        buy: {
          stableAmount: usd(REFERENCE_BUY),
          estimatedShares: formatDecimalAmount(shares, s.decimals),
          estimatedSharesAtomic: shares.toString(),
          // What a share costs in this buy, rounded down; null when the pool gives nothing for it.
          priceUsd: shares > 0n ? usd((REFERENCE_BUY * 10n ** BigInt(s.decimals)) / shares) : null,
        },
        source: `pool ${s.pool} (slot0) and QuoterV2 ${market.uniswap.quoter}`,
      };
    };

  const token =
    (s: StockInfo): Answer =>
    async (block) => {
      const [supply, pool] = await Promise.all([market.totalSupply(s.address, block), reserves(s, block)]);
      return {
        ...facts(s),
        totalSupply: formatDecimalAmount(supply, s.decimals),
        totalSupplyAtomic: supply.toString(),
        priceUsd: usd(pool.price),
        reserves: pool.view,
        liquidityUsd: usd(pool.liquidity),
      };
    };

  const list: Answer = async (block) => stockListing(network, await Promise.all(stocks.map((s) => market.livePrice(s, block))), o.slippageBps);

  const report: Answer = async (block) => {
    const rows = await Promise.all(stocks.map(async (s) => ({ s, ...(await reserves(s, block)) })));
    rows.sort((a, b) => (a.liquidity === b.liquidity ? a.s.symbol.localeCompare(b.s.symbol) : a.liquidity > b.liquidity ? -1 : 1));
    const total = rows.reduce((sum, r) => sum + r.liquidity, 0n);
    const byPrice = [...rows].sort((a, b) => (a.price === b.price ? a.s.symbol.localeCompare(b.s.symbol) : a.price > b.price ? -1 : 1));
    const brief = (r: (typeof rows)[number]) => ({ symbol: r.s.symbol, priceUsd: usd(r.price), liquidityUsd: usd(r.liquidity) });
    return {
      title: 'Tokenized stock market report',
      network: network.caip2,
      stablecoin: { address: network.stablecoin.address, symbol: network.stablecoin.symbol },
      stocks: rows.length,
      totalLiquidityUsd: usd(total),
      deepestPools: rows.slice(0, 3).map(brief),
      highestPriced: byPrice.slice(0, 3).map(brief),
      lowestPriced: byPrice.slice(-3).reverse().map(brief),
      pools: rows.map((r) => ({ ...facts(r.s), priceUsd: usd(r.price), reserves: r.view, liquidityUsd: usd(r.liquidity) })),
    };
  };

  const routes: Readonly<Record<string, (r: UpstreamRequest) => Checked<Answer>>> = {
    quote: (r) => {
      const stock = pickStock(stocks, r);
      return stock.ok ? good(quote(stock.value)) : stock;
    },
    token: (r) => {
      const stock = pickStock(stocks, r);
      return stock.ok ? good(token(stock.value)) : stock;
    },
    stocks: (r) => {
      const body = bodyObject(r);
      if (!body.ok) return body;
      return body.value === undefined || Object.keys(body.value).length === 0 ? good(list) : bad('the list takes no input: GET it, or POST an empty JSON object');
    },
    // The report's free-form `params` and body choose nothing yet: any JSON object is taken.
    report: (r) => {
      const body = bodyObject(r);
      return body.ok ? good(report) : body;
    },
  };

  async function serve(answer: Answer): Promise<UpstreamResult> {
    const started = performance.now();
    try {
      const block = await market.blockNumber();
      const body = { ...(await answer(block)), blockNumber: block.toString(), readAt: new Date(o.now()).toISOString() };
      const bytes = new TextEncoder().encode(JSON.stringify(body));
      return ok({ status: 200, headers: { 'content-type': JSON_CONTENT_TYPE, 'cache-control': 'no-store' }, body: bytes, latencyMs: performance.now() - started });
    } catch (err) {
      // For the gateway's logs and records only: the buyer hears that the upstream failed, and may send the same
      // credential again without paying again.
      return upstreamFailed(`stock chain read failed: ${(err as Error).message.split('\n')[0]}`, performance.now() - started);
    }
  }

  return (request) => {
    const cut = request.path.indexOf('/');
    const name = cut < 0 ? request.path : request.path.slice(0, cut);
    const route = Object.hasOwn(routes, name) ? routes[name] : undefined;
    if (!route) return bad(`chain-stocks has no route ${JSON.stringify(name.slice(0, 40))}`, 404);
    if (cut >= 0) return bad(`${name} takes no appended path`, 404);
    const checked = route(request);
    return checked.ok ? ok(() => serve(checked.value)) : checked;
  };
}

/** The JSON object body of a POST; undefined for a GET or an empty body. */
function bodyObject(r: UpstreamRequest): Checked<Record<string, unknown> | undefined> {
  if (r.method !== 'POST' || r.body === undefined || r.body.length === 0) return good(undefined);
  const parsed = parseJsonBytes(r.body);
  if (!parsed.ok || typeof parsed.value !== 'object' || parsed.value === null || Array.isArray(parsed.value)) return bad('the body must be a JSON object');
  return good(parsed.value as Record<string, unknown>);
}

/** The stock a quote or token request names: by `symbol` or `address`, from the JSON body of a POST that has one, else the query. */
function pickStock(stocks: readonly StockInfo[], r: UpstreamRequest): Checked<StockInfo> {
  const body = bodyObject(r);
  if (!body.ok) return body;
  let symbol: unknown;
  let address: unknown;
  if (body.value !== undefined) {
    const other = Object.keys(body.value).filter((k) => k !== 'symbol' && k !== 'address');
    if (other.length > 0) return bad(`the body takes only symbol and address, not ${JSON.stringify(other[0]!.slice(0, 40))}`);
    ({ symbol, address } = body.value);
  } else {
    const q = new URLSearchParams(r.query);
    symbol = q.get('symbol') || undefined;
    address = q.get('address') || undefined;
  }
  if ((symbol !== undefined && typeof symbol !== 'string') || (address !== undefined && typeof address !== 'string')) return bad('symbol and address are strings');
  const at = address === undefined ? undefined : parseAddress(address, 'address');
  if (at && !at.ok) return at;
  if (symbol === undefined) {
    if (!at) return bad('symbol is required (or address, the token contract), e.g. symbol=TSLA');
    const stock = stocks.find((s) => s.address.toLowerCase() === at.value.toLowerCase());
    return stock ? good(stock) : bad(`no listed stock has the token contract ${at.value}`, 404);
  }
  const found = findStock(stocks, symbol);
  if (found.ok && at && at.value.toLowerCase() !== found.value.address.toLowerCase()) return bad(`${at.value} is not the ${found.value.symbol} token contract`);
  return found;
}
