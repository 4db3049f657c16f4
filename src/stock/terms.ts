/**
 * The terms of a stock buy, as pure functions: input rules, the x402 offer, the slippage floor and the signed
 * quote a 402 carries. Nothing here touches the chain, the clock or a key it was not given.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Address } from 'viem';
import type { StockInfo } from '../chain/manifest.ts';
import type { Network } from '../chain/networks.ts';
import { formatDecimalAmount, parseDecimalAmount, USD_DECIMALS } from '../protocol/amounts.ts';
import type { PaymentRequirements } from '../protocol/x402/types.ts';
import { checkPayTo } from '../gateway/merchants/validate.ts';

/** Order size, stablecoin B atomic units: 1 to 1000 (spec section 8). */
export const ORDER_LIMITS = { min: 1_000_000n, max: 1_000_000_000n } as const;
/** A buy's permit must expire within this many seconds of the request. */
export const MAX_DEADLINE_SECONDS = 300;
/** Fees are zero: the challenge demands exactly `stable_amount`. */
export const FEE_ATOMIC = 0n;
const BPS = 10_000n;
const usd = (atomic: bigint) => formatDecimalAmount(atomic, USD_DECIMALS);
/** Fees and order limits as the stock API shows them. */
export const FEES = { amount: usd(FEE_ATOMIC), percent: '0' };
export const LIMITS = { minStableAmount: usd(ORDER_LIMITS.min), maxStableAmount: usd(ORDER_LIMITS.max) };

export type Checked<T> = { ok: true; value: T } | { ok: false; status: 400 | 404; error: string };
export const bad = (error: string, status: 400 | 404 = 400): { ok: false; status: 400 | 404; error: string } => ({ ok: false, status, error });

export interface BuyInput {
  stock: StockInfo;
  /** Atomic stablecoin B units to spend. */
  amount: bigint;
  /** Who receives the stock; the payer when absent. */
  recipient?: Address;
}

/** `stable_amount`: a plain decimal from 1 to 1000 with at most 6 fraction digits. */
export function parseStableAmount(raw: string | undefined): Checked<bigint> {
  if (raw === undefined || raw === '') return bad('stable_amount is required (stablecoin B to spend, 1 to 1000, at most 6 fraction digits)');
  const amount = parseDecimalAmount(raw, USD_DECIMALS);
  if (amount === undefined) return bad(`stable_amount ${JSON.stringify(raw.slice(0, 40))} is not a decimal number with at most 6 fraction digits`);
  if (amount < ORDER_LIMITS.min || amount > ORDER_LIMITS.max) {
    return bad(`stable_amount ${formatDecimalAmount(amount, USD_DECIMALS)} is outside the order limits: 1 to 1000`);
  }
  return { ok: true, value: amount };
}

export function findStock(stocks: readonly StockInfo[], symbol: string | undefined): Checked<StockInfo> {
  if (!symbol) return bad('symbol is required, e.g. symbol=TSLA');
  const stock = stocks.find((s) => s.symbol === symbol.toUpperCase());
  if (!stock) return bad(`unknown symbol ${JSON.stringify(symbol.slice(0, 16))}; GET /api/stock/list names the ${stocks.length} listed stocks`, 404);
  return { ok: true, value: stock };
}

/** A wallet address: mixed case must carry a valid EIP-55 checksum. */
export function parseAddress(raw: string, field: string): Checked<Address> {
  const checked = checkPayTo(raw);
  if (!checked.ok) return bad(checked.error.replace(/^payTo/, field));
  return { ok: true, value: checked.value };
}

/** The query of quote and buy: symbol, stable_amount and (buy only) recipient. */
export function parseBuyInput(query: URLSearchParams, stocks: readonly StockInfo[], opts: { recipient: boolean }): Checked<BuyInput> {
  const stock = findStock(stocks, query.get('symbol') ?? undefined);
  if (!stock.ok) return stock;
  const amount = parseStableAmount(query.get('stable_amount') ?? undefined);
  if (!amount.ok) return amount;
  const raw = opts.recipient ? query.get('recipient') : null;
  if (raw === null || raw === '') return { ok: true, value: { stock: stock.value, amount: amount.value } };
  const recipient = parseAddress(raw, 'recipient');
  if (!recipient.ok) return recipient;
  return { ok: true, value: { stock: stock.value, amount: amount.value, recipient: recipient.value } };
}

/**
 * The stock list (`GET /api/stock/list`, and the paid `/m/chain-stocks/stocks`): every listed stock of `n` with its
 * live price (`prices[i]`, stablecoin B atomic units per share; null where it could not be read), fees and limits.
 */
export function stockListing(n: Network, prices: readonly (bigint | null)[], slippageBps: number): Record<string, unknown> {
  return {
    network: n.caip2,
    stablecoin: { address: n.stablecoin.address, symbol: n.stablecoin.symbol, decimals: n.stablecoin.decimals },
    stocks: (n.stocks ?? []).map((s, i) => {
      const price = prices[i];
      return {
        symbol: s.symbol,
        name: s.name,
        address: s.address,
        decimals: s.decimals,
        pool: s.pool,
        poolFee: s.fee,
        priceUsd: price === null || price === undefined ? null : usd(price),
        fees: FEES,
        limits: LIMITS,
        slippageBps,
      };
    }),
  };
}

/** The one offer of a buy: Permit2 with stablecoin B, through the exact-permit proxy, to the stock desk. */
export function buyOffer(n: Network, desk: Address, amount: bigint): PaymentRequirements {
  if (!n.exactPermit2Proxy) throw new Error(`${n.caip2} has no exact-permit proxy`);
  return {
    scheme: 'exact',
    network: n.caip2 as `eip155:${string}`,
    amount: (amount + FEE_ATOMIC).toString(),
    asset: n.stablecoin.address,
    payTo: desk,
    maxTimeoutSeconds: MAX_DEADLINE_SECONDS,
    extra: { assetTransferMethod: 'permit2', spender: n.exactPermit2Proxy },
  };
}

/** The least a buy may deliver: the quote less the per-token slippage bound, rounded down. */
export function slippageFloor(quotedShares: bigint, slippageBps: number): bigint {
  return (quotedShares * (BPS - BigInt(slippageBps))) / BPS;
}

/**
 * The quote a 402 stands behind: shares estimated on chain, the floor the swap will not go below, and until when.
 * The buyer's client echoes it back in `accepted.extra.quote`; the MAC proves the gateway issued it for this
 * stock and amount, so the floor the buyer saw is the floor the swap uses.
 */
export interface SignedQuote {
  symbol: string;
  amount: string;
  shares: string;
  minShares: string;
  expires: number;
  mac: string;
}

function quoteMac(key: Uint8Array, q: Omit<SignedQuote, 'mac'>): string {
  return createHmac('sha256', key).update(`${q.symbol}|${q.amount}|${q.shares}|${q.minShares}|${q.expires}`).digest('base64url');
}

export function signQuote(key: Uint8Array, q: Omit<SignedQuote, 'mac'>): SignedQuote {
  return { ...q, mac: quoteMac(key, q) };
}

/** The echoed quote, if it is ours, unexpired, and for this stock and amount. */
export function readQuote(key: Uint8Array, echoed: unknown, want: { symbol: string; amount: bigint; nowSeconds: number }): SignedQuote | undefined {
  if (!echoed || typeof echoed !== 'object') return undefined;
  const q = echoed as Record<string, unknown>;
  const digits = (v: unknown): v is string => typeof v === 'string' && /^\d{1,78}$/.test(v);
  if (typeof q.symbol !== 'string' || !digits(q.amount) || !digits(q.shares) || !digits(q.minShares) || typeof q.expires !== 'number' || typeof q.mac !== 'string') return undefined;
  const quote: SignedQuote = { symbol: q.symbol, amount: q.amount, shares: q.shares, minShares: q.minShares, expires: q.expires, mac: q.mac };
  const expected = Buffer.from(quoteMac(key, quote));
  const given = Buffer.from(quote.mac);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
  if (quote.symbol !== want.symbol || BigInt(quote.amount) !== want.amount || quote.expires < want.nowSeconds) return undefined;
  return quote;
}
