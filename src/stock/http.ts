import type { Address } from 'viem';
import { acceptedRequest, decodeX402Credential, x402CredentialHeader } from '../front-door/x402.ts';
import { paymentRequired, paymentRequiredHeader, paymentResponseHeader } from '../front-door/x402-answer.ts';
import { isJsonContentType } from '../http/content-type.ts';
import { json, type HttpHandler, type HttpResponse } from '../http/server.ts';
import { formatDecimalAmount, USD_DECIMALS } from '../protocol/amounts.ts';
import { unchargedText, type HttpFailure } from '../protocol/result.ts';
import { declaredExtensions, type PaidResourceDescription } from '../protocol/x402/extensions/index.ts';
import type { PaymentRequirements } from '../protocol/x402/types.ts';
import type { GasSponsor } from './gas-sponsor.ts';
import type { StockDesk } from './order-desk.ts';
import type { StockOrder } from './order-record.ts';
import {
  buyOffer,
  buyOfQuote,
  FEE_ATOMIC,
  FEES,
  MAX_DEADLINE_SECONDS,
  parseAddress,
  parseBuyInput,
  queryDisagreement,
  readQuote,
  signQuote,
  slippageFloor,
  stockListing,
  type BuyInput,
  type QuoteScope,
} from './terms.ts';

export interface StockHttpOptions {
  desk: StockDesk;
  /** Gas sponsorship (refused where the desk does not run). */
  sponsor: Pick<GasSponsor, 'sponsor'>;
  /** Signs the quote a 402 carries (see `terms.ts`). */
  quoteKey: Uint8Array;
  /** The per-token slippage bound, basis points below the quote. */
  slippageBps: number;
  baseUrl: string;
  /** How long a paid buy waits for its order to finish before it answers 202 with the order's address. */
  orderWaitMs: number;
  now(): number;
}

export interface StockHandlers {
  list: HttpHandler;
  quote: HttpHandler;
  buy: HttpHandler;
  order: HttpHandler;
  orders: HttpHandler;
  sponsor: HttpHandler;
}

const NO_STORE = { 'cache-control': 'no-store' };
const usd = (atomic: bigint) => formatDecimalAmount(atomic, USD_DECIMALS);
/** A refused request's answer: its status, and its message as `error`. */
const refused = (f: HttpFailure): HttpResponse => json(f.status, { error: f.message }, NO_STORE);
/** A clock a little ahead of ours must not make a 300-second permit look too long. */
const DEADLINE_SKEW_SECONDS = 5;

/** The stock purchase API (spec 4.2, 4.3): list, quote, buy, order, orders, and gas sponsorship. */

/** How the stock buy is called, as its 402 declares it to x402 bazaar clients (`protocol/x402/extensions`). */
const BUY_RESOURCE: PaidResourceDescription = {
  method: 'POST',
  query: [
    { name: 'symbol', description: 'The stock to buy, by ticker (GET /api/stock/list).', required: true, schema: { type: 'string', minLength: 1 }, example: 'TSLA' },
    { name: 'stable_amount', description: 'Stablecoin B to spend, 1 to 1000.', required: true, schema: { type: 'number', minimum: 1, maximum: 1000 }, example: 1 },
    { name: 'recipient', description: 'Who receives the stock; the payer when absent.', required: false, schema: { type: 'string', pattern: '^0x[0-9a-fA-F]{40}$' } },
  ],
  freeFormQuery: false,
  body: { schema: { type: 'object', maxProperties: 0 }, example: {} },
  output: { type: 'json', format: 'object' },
};
const BUY_EXTENSIONS = declaredExtensions(BUY_RESOURCE);

export function stockHandlers(o: StockHttpOptions): StockHandlers {
  const market = o.desk.market;
  const stocks = market.stocks;
  const network = market.network;
  const nowSeconds = () => Math.floor(o.now() / 1000);

  const scope: QuoteScope = { network: network.caip2, desk: o.desk.address };

  /** The terms of a buy, quoted on chain now and signed, so the paid retry is held to them. */
  async function terms(input: BuyInput): Promise<{ offer: PaymentRequirements; quoted: bigint; floor: bigint; expires: number }> {
    const [quoted, block] = await Promise.all([market.quote(input.stock, input.amount), market.blockNumber()]);
    const floor = slippageFloor(quoted, o.slippageBps);
    const expires = nowSeconds() + MAX_DEADLINE_SECONDS;
    const quote = signQuote(
      o.quoteKey,
      { symbol: input.stock.symbol, amount: input.amount.toString(), recipient: input.recipient ?? '', shares: quoted.toString(), minShares: floor.toString(), block: block.toString(), expires },
      scope,
    );
    const base = buyOffer(network, o.desk.address, input.amount);
    return { offer: { ...base, extra: { ...base.extra, quote } }, quoted, floor, expires };
  }

  async function challenge(req: { query: string }, input: BuyInput, error?: string): Promise<HttpResponse> {
    let t: Awaited<ReturnType<typeof terms>>;
    try {
      t = await terms(input);
    } catch {
      return json(503, { error: 'the pool cannot be quoted right now; nothing was charged, try again shortly' }, NO_STORE);
    }
    const required = paymentRequired(
      { url: `${o.baseUrl}/api/stock/buy?${req.query}`, description: `Buy ${input.stock.symbol} for ${usd(input.amount)} stablecoin B`, mimeType: 'application/json' },
      [t.offer],
      error || undefined,
      BUY_EXTENSIONS,
    );
    const body = {
      ...required,
      terms: {
        symbol: input.stock.symbol,
        stableAmount: usd(input.amount),
        total: { amount: usd(input.amount + FEE_ATOMIC), atomic: (input.amount + FEE_ATOMIC).toString() },
        fees: FEES,
        estimatedShares: formatDecimalAmount(t.quoted, input.stock.decimals),
        minimumShares: formatDecimalAmount(t.floor, input.stock.decimals),
        slippageBps: o.slippageBps,
        payTo: o.desk.address,
        spender: t.offer.extra?.spender,
        quoteExpires: new Date(t.expires * 1000).toISOString(),
        recipient: input.recipient ?? 'the payer',
      },
    };
    return json(402, body, { ...NO_STORE, ...paymentRequiredHeader(required) });
  }

  return {
    async list(): Promise<HttpResponse> {
      const prices = await Promise.all(stocks.map((s) => market.livePrice(s).catch(() => null)));
      return json(200, stockListing(network, prices, o.slippageBps), NO_STORE);
    },

    async quote(req): Promise<HttpResponse> {
      const input = parseBuyInput(new URLSearchParams(req.query), stocks, { recipient: false });
      if (!input.ok) return refused(input.error);
      let shares: bigint;
      try {
        shares = await market.quote(input.value.stock, input.value.amount);
      } catch {
        return json(503, { error: 'the pool cannot be quoted right now; try again shortly' }, NO_STORE);
      }
      const { stock, amount } = input.value;
      const floor = slippageFloor(shares, o.slippageBps);
      return json(
        200,
        {
          symbol: stock.symbol,
          stableAmount: usd(amount),
          total: { amount: usd(amount + FEE_ATOMIC), atomic: (amount + FEE_ATOMIC).toString() },
          fees: FEES,
          estimatedShares: formatDecimalAmount(shares, stock.decimals),
          estimatedSharesAtomic: shares.toString(),
          minimumShares: formatDecimalAmount(floor, stock.decimals),
          minimumSharesAtomic: floor.toString(),
          slippageBps: o.slippageBps,
          source: `QuoterV2 ${market.uniswap.quoter} on ${network.caip2}, pool ${stock.pool}`,
          quotedAt: new Date(o.now()).toISOString(),
        },
        NO_STORE,
      );
    },

    async buy(req): Promise<HttpResponse> {
      const query = new URLSearchParams(req.query);
      const header = x402CredentialHeader(req.headers);
      if (header === undefined) {
        const parsed = parseBuyInput(query, stocks, { recipient: true });
        if (!parsed.ok) return refused(parsed.error);
        return challenge(req, parsed.value);
      }

      // The paid retry: every term comes from the signed quote the payment echoes, none from this request's query.
      const decoded = decodeX402Credential(header);
      if (!decoded.ok) return refused(decoded.error);
      const verdict = readQuote(o.quoteKey, decoded.value.accepted?.extra?.quote, scope, nowSeconds());
      if (!verdict.ok && verdict.error.code === 'altered') return json(400, { error: unchargedText(verdict.error.message) }, NO_STORE);
      if (!verdict.ok) {
        // Missing or expired: fresh terms for what the query asks, when it asks for something buyable.
        const parsed = parseBuyInput(query, stocks, { recipient: true });
        if (!parsed.ok) return refused(parsed.error);
        return challenge(req, parsed.value, unchargedText(`${verdict.error.message}: pay against these fresh terms`));
      }
      const input = buyOfQuote(verdict.value, stocks);
      if (!input) return json(400, { error: unchargedText(`the quoted stock ${JSON.stringify(verdict.value.symbol)} is no longer sold`) }, NO_STORE);
      const disagreement = queryDisagreement(query, input);
      if (disagreement) return json(400, { error: unchargedText(`the query disagrees with the signed quote: ${disagreement}`) }, NO_STORE);

      const accepted = acceptedRequest([buyOffer(network, o.desk.address, input.amount)], decoded.value);
      if (!accepted) return challenge(req, input, unchargedText('the payment does not accept these terms (amount, asset, network, recipient or spender differ)'));
      const payload = decoded.value.payload;
      if (!('permit2Authorization' in payload)) return challenge(req, input, 'a stock buy is paid with a Permit2 witness transfer on the stock chain');
      const deadline = BigInt(payload.permit2Authorization.deadline);
      if (deadline > BigInt(nowSeconds() + MAX_DEADLINE_SECONDS + DEADLINE_SKEW_SECONDS)) {
        return challenge(req, input, unchargedText(`the permit deadline must be within ${MAX_DEADLINE_SECONDS} seconds`));
      }

      const q = verdict.value;
      let order: StockOrder | undefined;
      try {
        order = await o.desk.place(accepted, input, { quotedShares: BigInt(q.shares), minShares: BigInt(q.minShares), quoteBlock: BigInt(q.block) });
      } catch {
        return json(409, { error: 'this payment is being placed by another request; fetch the order in a moment' }, NO_STORE);
      }
      order = (await o.desk.wait(order.id, o.orderWaitMs)) ?? order;
      return orderAnswer(order);
    },

    async order(req): Promise<HttpResponse> {
      const id = req.params.id ?? '';
      const order = await o.desk.get(id);
      if (!order) return json(404, { error: `no order ${JSON.stringify(id.slice(0, 64))}` }, NO_STORE);
      return json(200, publicOrder(order), NO_STORE);
    },

    async orders(req): Promise<HttpResponse> {
      const q = new URLSearchParams(req.query);
      const rawLimit = q.get('limit');
      const limit = rawLimit === null || rawLimit === '' ? 20 : /^\d{1,4}$/.test(rawLimit) ? Number(rawLimit) : NaN;
      if (!Number.isInteger(limit) || limit < 1 || limit > 100) return json(400, { error: 'limit must be a whole number from 1 to 100' }, NO_STORE);
      const rawPayer = q.get('payer');
      let payer: Address | undefined;
      if (rawPayer !== null && rawPayer !== '') {
        const p = parseAddress(rawPayer, 'payer');
        if (!p.ok) return refused(p.error);
        payer = p.value;
      }
      return json(200, { orders: (await o.desk.history(payer, limit)).map(publicOrder), ...(payer ? { payer } : { feed: 'global' }) }, NO_STORE);
    },

    async sponsor(req): Promise<HttpResponse> {
      if (!isJsonContentType(req.headers['content-type'])) return json(415, { error: 'content-type must be application/json' }, NO_STORE);
      let address: unknown;
      try {
        address = (JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(await req.body())) as { address?: unknown } | null)?.address;
      } catch {
        return json(400, { error: 'the body must be JSON: {"address": "0x..."}' }, NO_STORE);
      }
      if (typeof address !== 'string') return json(400, { error: 'address is required: {"address": "0x..."}' }, NO_STORE);
      const checked = parseAddress(address, 'address');
      if (!checked.ok) return refused(checked.error);
      let outcome: Awaited<ReturnType<typeof o.sponsor.sponsor>>;
      try {
        outcome = await o.sponsor.sponsor(checked.value);
      } catch {
        return json(503, { error: 'the chain cannot be reached right now; nothing was sent, try again later' }, NO_STORE);
      }
      if (!outcome.ok)
        return json(
          outcome.error.status,
          { error: outcome.error.message, condition: outcome.error.code },
          outcome.error.retryAfterSeconds ? { ...NO_STORE, 'retry-after': String(outcome.error.retryAfterSeconds) } : NO_STORE,
        );
      const s = outcome.value;
      return json(
        200,
        {
          address: s.address,
          amountWei: s.amountWei,
          transaction: s.transaction,
          gasEstimate: s.gasEstimate,
          maxFeePerGas: s.maxFeePerGas,
          next: `approve ${network.permit2 ?? 'Permit2'} to spend stablecoin B ${market.stable} (once); then every buy is a signature`,
        },
        NO_STORE,
      );
    },
  };
}

/** How a buy answers once its order is over (or still running at the wait's end). */
function orderAnswer(order: StockOrder): HttpResponse {
  const view = publicOrder(order);
  const paid: Record<string, string> = order.settlement?.success ? paymentResponseHeader(order.settlement) : {};
  switch (order.state) {
    case 'delivered':
      return json(200, view, { ...NO_STORE, ...paid });
    case 'refunded':
      return json(502, { error: `delivery failed (${order.failure?.reason ?? 'unknown'}); your stablecoin B was refunded`, ...view }, { ...NO_STORE, ...paid });
    case 'refundWaiting':
    case 'refunding':
    case 'confirmingRefund':
      return json(502, { error: `delivery failed (${order.failure?.reason ?? 'unknown'}); the refund is queued and will be sent`, ...view }, { ...NO_STORE, ...paid });
    case 'rejected':
      return json(
        402,
        { error: unchargedText(`the payment did not settle (${order.failure?.reason ?? 'unknown'})`), ...view },
        order.settlement ? { ...NO_STORE, ...paymentResponseHeader(order.settlement) } : NO_STORE,
      );
    default:
      return json(202, { ...view, detail: `the order is still running; GET /api/stock/order/${order.id} for its outcome (do not pay again)` }, { ...NO_STORE, ...paid });
  }
}

/** The order as the API shows it: amounts as decimals and atomic units, every transaction hash. */
export function publicOrder(order: StockOrder): Record<string, unknown> {
  const shares = (v: string | undefined) => (v === undefined ? undefined : formatDecimalAmount(BigInt(v), order.stockDecimals));
  return {
    orderId: order.id,
    status: order.state,
    symbol: order.symbol,
    stock: order.stock,
    payer: order.payer,
    recipient: order.recipient,
    stableAmount: usd(BigInt(order.amount)),
    amountAtomic: order.amount,
    quotedShares: shares(order.quotedShares),
    minimumShares: shares(order.minShares),
    requotedShares: shares(order.requotedShares),
    delivered: shares(order.delivered),
    deliveredAtomic: order.delivered,
    network: order.network,
    settlementTx: order.settlement?.success ? order.settlement.transaction : undefined,
    swapTx: order.swapTx ?? order.swapTxs.at(-1)?.hash,
    refundTx: order.refundTx ?? order.refundTxs.at(-1)?.hash,
    failure: order.failure,
    refundAttempts: order.refundAttempts,
    createdAt: new Date(order.createdAt).toISOString(),
    updatedAt: new Date(order.updatedAt).toISOString(),
  };
}
