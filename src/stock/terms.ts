/**
 * The terms of a stock buy, as pure functions: input rules, the x402 offer, the slippage floor and the signed
 * quote a 402 carries. Nothing here touches the chain, the clock or a key it was not given.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Address } from 'viem';
import type { StockInfo } from '../chain/network-types.ts';
import type { Network } from '../chain/networks.ts';
import { checkAddress } from '../protocol/address.ts';
import { formatDecimalAmount, parseDecimalAmount, USD_DECIMALS } from '../protocol/amounts.ts';
import { err, ok, refusal, type Err, type Failure, type HttpFailure, type Ok } from '../protocol/result.ts';
import type { PaymentRequirements } from '../protocol/x402/types.ts';
import { permit2Scheme } from '../schemes/permit2/scheme.ts';

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

/** Why a stock request's input is refused: bad input or address (400), or nothing of that name (404). */
export type TermsRefusalCode = 'invalid_input' | 'invalid_address' | 'not_found';
export type Checked<T> = Ok<T> | Err<HttpFailure<TermsRefusalCode>>;
/** A refusal of bad input (400), or of a name that matches nothing (404). */
export const bad = (message: string, status: 400 | 404 = 400): Err<HttpFailure<TermsRefusalCode>> => refusal(status === 404 ? 'not_found' : 'invalid_input', message, status);

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
  return ok(amount);
}

export function findStock(stocks: readonly StockInfo[], symbol: string | undefined): Checked<StockInfo> {
  if (!symbol) return bad('symbol is required, e.g. symbol=TSLA');
  const stock = stocks.find((s) => s.symbol === symbol.toUpperCase());
  if (!stock) return bad(`unknown symbol ${JSON.stringify(symbol.slice(0, 16))}; GET /api/stock/list names the ${stocks.length} listed stocks`, 404);
  return ok(stock);
}

/** A wallet address: mixed case must carry a valid EIP-55 checksum. */
export function parseAddress(raw: string, field: string): Checked<Address> {
  return checkAddress(raw, field);
}

/** The query of quote and buy: symbol, stable_amount and (buy only) recipient. */
export function parseBuyInput(query: URLSearchParams, stocks: readonly StockInfo[], opts: { recipient: boolean }): Checked<BuyInput> {
  const stock = findStock(stocks, query.get('symbol') ?? undefined);
  if (!stock.ok) return stock;
  const amount = parseStableAmount(query.get('stable_amount') ?? undefined);
  if (!amount.ok) return amount;
  const raw = opts.recipient ? query.get('recipient') : null;
  if (raw === null || raw === '') return ok({ stock: stock.value, amount: amount.value });
  const recipient = parseAddress(raw, 'recipient');
  if (!recipient.ok) return recipient;
  return ok({ stock: stock.value, amount: amount.value, recipient: recipient.value });
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
  const extra = permit2Scheme.requirementsExtra(n);
  if (!extra) throw new Error(`${n.caip2} has no exact-permit proxy`);
  return {
    scheme: 'exact',
    network: n.caip2 as `eip155:${string}`,
    amount: (amount + FEE_ATOMIC).toString(),
    asset: n.stablecoin.address,
    payTo: desk,
    maxTimeoutSeconds: MAX_DEADLINE_SECONDS,
    extra,
  };
}

/** The least a buy may deliver: the quote less the per-token slippage bound, rounded down. */
export function slippageFloor(quotedShares: bigint, slippageBps: number): bigint {
  return (quotedShares * (BPS - BigInt(slippageBps))) / BPS;
}

/**
 * The terms a 402 stands behind, signed by the gateway: the stock, the amount, who receives the shares ('' for the
 * payer), the shares estimated on chain, the floor the swap will not go below, the block the quote was read at, and
 * until when it holds. The buyer's client echoes it back verbatim in `accepted.extra.quote`; the paid retry takes
 * every term from it (never from its own query), so the header's holder cannot pick another recipient, stock,
 * amount or floor. The MAC also covers the network and the desk, which are not sent.
 */
export interface SignedQuote {
  symbol: string;
  amount: string;
  recipient: string;
  shares: string;
  minShares: string;
  block: string;
  expires: number;
  mac: string;
}

export type QuoteTerms = Omit<SignedQuote, 'mac'>;
/** What the MAC binds besides the quote's own fields. */
export interface QuoteScope {
  network: string;
  desk: Address;
}

/** The echoed quote, or why it cannot be held to: none echoed, not ours or altered, or expired. */
export type QuoteVerdict = Ok<SignedQuote> | Err<Failure<'missing' | 'altered' | 'expired'>>;

const MISSING = err('missing', 'the payment carries no signed quote (accepted.extra.quote)');
const ALTERED = err('altered', 'the signed quote in accepted.extra.quote was altered or is not ours');
const EXPIRED = err('expired', 'the quote has expired');

function quoteMac(key: Uint8Array, q: QuoteTerms, scope: QuoteScope): string {
  const fields = ['gate402 stock quote v2', scope.network, scope.desk.toLowerCase(), q.symbol, q.amount, q.recipient, q.shares, q.minShares, q.block, String(q.expires)];
  return createHmac('sha256', key).update(JSON.stringify(fields)).digest('base64url');
}

export function signQuote(key: Uint8Array, q: QuoteTerms, scope: QuoteScope): SignedQuote {
  return { ...q, mac: quoteMac(key, q, scope) };
}

const DIGITS = /^\d{1,78}$/;
const RECIPIENT = /^(0x[0-9a-fA-F]{40})?$/;

/** The echoed quote: ours and unaltered, and unexpired at `nowSeconds`; or why not. */
export function readQuote(key: Uint8Array, echoed: unknown, scope: QuoteScope, nowSeconds: number): QuoteVerdict {
  if (echoed === undefined || echoed === null) return MISSING;
  if (typeof echoed !== 'object' || Array.isArray(echoed)) return ALTERED;
  const q = echoed as Record<string, unknown>;
  const digits = (v: unknown): v is string => typeof v === 'string' && DIGITS.test(v);
  if (
    typeof q.symbol !== 'string' ||
    q.symbol.length > 16 ||
    !digits(q.amount) ||
    !digits(q.shares) ||
    !digits(q.minShares) ||
    !digits(q.block) ||
    typeof q.recipient !== 'string' ||
    !RECIPIENT.test(q.recipient) ||
    typeof q.expires !== 'number' ||
    !Number.isSafeInteger(q.expires) ||
    typeof q.mac !== 'string'
  ) {
    return ALTERED;
  }
  const quote: SignedQuote = { symbol: q.symbol, amount: q.amount, recipient: q.recipient, shares: q.shares, minShares: q.minShares, block: q.block, expires: q.expires, mac: q.mac };
  const expected = Buffer.from(quoteMac(key, quote, scope));
  const given = Buffer.from(quote.mac);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return ALTERED;
  if (quote.expires < nowSeconds) return EXPIRED;
  return ok(quote);
}

/** The buy a verified quote names; undefined when its stock is no longer listed or its amount is out of bounds. */
export function buyOfQuote(quote: SignedQuote, stocks: readonly StockInfo[]): BuyInput | undefined {
  const stock = stocks.find((s) => s.symbol === quote.symbol);
  const amount = BigInt(quote.amount);
  if (!stock || amount < ORDER_LIMITS.min || amount > ORDER_LIMITS.max) return undefined;
  return { stock, amount, ...(quote.recipient ? { recipient: quote.recipient as Address } : {}) };
}

/**
 * Where the paid retry's own query disagrees with the signed terms: a parameter it names must say what the quote
 * says (the recipient, when the quote names one, must be named). Undefined when they agree.
 */
export function queryDisagreement(query: URLSearchParams, signed: BuyInput): string | undefined {
  const symbol = query.get('symbol');
  if (symbol !== null && symbol.toUpperCase() !== signed.stock.symbol) return `symbol ${JSON.stringify(symbol.slice(0, 16))} is not the quoted ${signed.stock.symbol}`;
  const rawAmount = query.get('stable_amount');
  if (rawAmount !== null) {
    const amount = parseDecimalAmount(rawAmount, USD_DECIMALS);
    if (amount !== signed.amount) return `stable_amount ${JSON.stringify(rawAmount.slice(0, 40))} is not the quoted ${formatDecimalAmount(signed.amount, USD_DECIMALS)}`;
  }
  const rawRecipient = query.get('recipient');
  const recipient = rawRecipient === null || rawRecipient === '' ? '' : rawRecipient.toLowerCase();
  const quoted = (signed.recipient ?? '').toLowerCase();
  if (recipient !== quoted) return `recipient ${recipient ? JSON.stringify(rawRecipient!.slice(0, 42)) : '(the payer)'} is not the quoted ${signed.recipient ?? '(the payer)'}`;
  return undefined;
}
