/**
 * One stock buy, from the page's point of view: the on-chain quote and payment terms (a 402), the Permit2 signature
 * in the wallet, the paid request, and the order followed until it is delivered or refunded.
 */
import { api, ApiError } from './api.ts';
import { showMessage } from './chrome.ts';
import { erc20, uint } from './chain-calls.ts';
import type { WebPageConfig } from './config.ts';
import { fromAtomic, money, shares } from './format.ts';
import { paymentSignatureHeader, permitFor } from './permit2.ts';
import { reasonInWords } from './reasons.ts';
import { type OrderCard, stepsFor, txLink } from './stock-order-view.ts';
import { FINAL_ORDER_STATES, type BuyChallenge, type StockOrderView, type StockRow } from './stock-types.ts';
import type { Wallet } from './wallet.ts';

type Hex = `0x${string}`;

/** What a buy uses of the page. */
export interface BuyPage {
  chain: WebPageConfig['stockChain'];
  wallet: Wallet;
  /** Where the buy says how it goes. */
  message: HTMLElement;
  order: OrderCard;
  stockOf(symbol: string): StockRow | undefined;
}

/** The order this buy created, found in the wallet's history while the paid request is still running. */
async function findNewOrder(payer: Hex, known: Set<string>, symbol: string, atomic: string): Promise<StockOrderView | undefined> {
  const { body } = await api<{ orders: StockOrderView[] }>(`/api/stock/orders?payer=${payer}&limit=5`);
  return body.orders.find((o) => !known.has(o.orderId) && o.symbol === symbol && o.amountAtomic === atomic);
}

export async function buy(page: BuyPage, symbol: string, amount: string, payer: Hex): Promise<void> {
  const { chain, wallet } = page;
  if (!chain) return;
  const query = `symbol=${encodeURIComponent(symbol)}&stable_amount=${amount}`;
  showMessage(page.message, 'progress', 'Getting the on-chain quote and the payment terms…');
  const challenge = await api<BuyChallenge>(`/api/stock/buy?${query}`, { method: 'POST', expect: [402] });
  if (challenge.status !== 402) throw new ApiError(challenge.status, 'The gateway did not ask for a payment; nothing was charged. Try again.');
  const terms = challenge.body.terms;
  const offer = challenge.body.accepts[0];
  if (!offer || !terms) throw new ApiError(402, 'The gateway sent no payment terms this page understands; nothing was charged.');
  if (offer.network !== chain.caip2) throw new ApiError(402, `The gateway asks for payment on ${offer.network}, not on the ${chain.name}; nothing was charged.`);

  page.order.showSteps(stepsFor('signing', terms), 'signing');
  showMessage(page.message, 'progress', `Sign the payment of ${money(terms.total.amount)} stablecoin B in your wallet.`);
  const permit = permitFor(offer, payer, chain.permit2, Math.floor(Date.now() / 1000));
  const signature = await wallet.signTypedData(permit.typedData, 'the payment signature').catch((err: unknown) => {
    page.order.showSteps(stepsFor('quoted', terms), 'declined');
    throw err;
  });

  const known = new Set((await api<{ orders: StockOrderView[] }>(`/api/stock/orders?payer=${payer}&limit=5`).catch(() => ({ body: { orders: [] } }))).body.orders.map((o) => o.orderId));
  page.order.showSteps(stepsFor('settling', terms), 'settling');
  showMessage(page.message, 'progress', 'Payment signed. The gateway settles it, then swaps on the pool…');

  // While the paid request runs, its order is followed through the wallet's history.
  let live: StockOrderView | undefined;
  let running = true;
  const follow = (async () => {
    while (running) {
      await new Promise((r) => setTimeout(r, 400));
      if (!running) break;
      const found = await findNewOrder(payer, known, symbol, offer.amount).catch(() => undefined);
      if (found && running) {
        live = found;
        page.order.showSteps(stepsFor('settling', terms, found), found.status);
        page.order.showFacts(found);
      }
    }
  })();
  let answer: Awaited<ReturnType<typeof api<StockOrderView>>>;
  try {
    answer = await api<StockOrderView>(`/api/stock/buy?${query}`, {
      method: 'POST',
      headers: { 'payment-signature': paymentSignatureHeader(offer, challenge.body.resource, permit.authorization, signature) },
      expect: [202, 402, 409, 502],
      timeoutMs: 120_000,
    });
  } finally {
    running = false;
    await follow;
  }

  let order: StockOrderView | undefined = answer.body.orderId ? answer.body : live;
  if (answer.status === 402 && !answer.body.orderId) {
    page.order.showSteps(stepsFor('quoted', terms), 'refused');
    throw new ApiError(
      402,
      `${answer.body.error ? `${answer.body.error.charAt(0).toUpperCase()}${answer.body.error.slice(1)}` : 'The payment was not accepted; nothing was charged'}. Try the buy again.`,
    );
  }
  // Still running (202), or placed by a concurrent request (409): follow the order until it is over.
  while (order && !FINAL_ORDER_STATES.has(order.status)) {
    page.order.showSteps(stepsFor('settling', terms, order), order.status);
    page.order.showFacts(order);
    showMessage(page.message, 'progress', order.status.startsWith('refund') || order.status === 'confirmingRefund' ? 'Delivery failed; your refund is on its way…' : 'Your order is still running…');
    await new Promise((r) => setTimeout(r, 1000));
    order = (await api<StockOrderView>(`/api/stock/order/${encodeURIComponent(order.orderId)}`)).body;
  }
  if (!order) {
    throw new ApiError(answer.status, `${answer.body.error ?? 'The gateway did not say what became of the order'}. Look for it in your orders below before paying again.`);
  }
  page.order.showSteps(stepsFor('settling', terms, order), order.status);
  page.order.showFacts(order);
  if (order.status === 'delivered') {
    const stock = page.stockOf(order.symbol);
    const held = stock
      ? await wallet
          .call(stock.address, erc20.balanceOf(order.recipient))
          .then(uint)
          .catch(() => undefined)
      : undefined;
    showMessage(
      page.message,
      'success',
      `Delivered ${shares(order.delivered)} ${order.symbol} to your wallet.`,
      held !== undefined && stock ? ` It now holds ${shares(fromAtomic(held, stock.decimals))} ${order.symbol}.` : '',
    );
  } else if (order.status === 'refunded') {
    showMessage(
      page.message,
      'error',
      `Not bought. ${reasonInWords(order.failure?.reason, 'The swap did not happen.')} Your ${money(order.stableAmount)} stablecoin B was refunded in `,
      txLink(order.refundTx ?? ''),
      '.',
    );
  } else {
    showMessage(page.message, 'error', `Your payment did not settle. ${reasonInWords(order.failure?.reason, 'The gateway refused it.')} Nothing was charged.`);
  }
}
