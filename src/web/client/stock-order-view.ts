/**
 * How the stock page shows an order: the steps of a buy as its record tells them, the order's facts, and lists of
 * orders (the wallet's history, the feed). Rendering only: what to show comes from the stock API.
 */
import { el, replaceChildren } from './dom.ts';
import { ago, money, shares, shortHash } from './format.ts';
import { reasonInWords } from './reasons.ts';
import type { BuyChallenge, StockOrderView } from './stock-types.ts';
import { shortAddress } from './wallet.ts';

export type StepState = 'pending' | 'active' | 'done' | 'failed';
export interface Step {
  title: string;
  state: StepState;
  detail?: string;
  tx?: string;
}

export function txLink(hash: string): HTMLElement {
  return el('code', { class: 'tx', text: shortHash(hash), title: hash, attrs: { 'data-tx': hash } });
}

/** The order card of the page: the steps of the buy under way and the facts of its order. */
export class OrderCard {
  constructor(
    private readonly card: HTMLElement,
    private readonly steps: HTMLElement,
    private readonly facts: HTMLElement,
  ) {}

  showSteps(steps: Step[], status: string): void {
    this.card.hidden = false;
    this.card.dataset.status = status;
    replaceChildren(
      this.steps,
      ...steps.map((s) =>
        el(
          'li',
          { class: `step ${s.state}`, attrs: { 'aria-current': s.state === 'active' ? 'step' : undefined } },
          el('span', { class: 'step-title', text: s.title }),
          s.detail ? el('span', { class: 'step-detail', text: s.detail }) : null,
          s.tx ? el('span', { class: 'step-tx' }, 'Transaction ', el('code', { class: 'tx full', text: s.tx, attrs: { 'data-tx': s.tx } })) : null,
        ),
      ),
    );
  }

  showFacts(order: StockOrderView): void {
    const row = (label: string, value: Node | string) => el('div', {}, el('dt', { text: label }), el('dd', {}, value));
    replaceChildren(
      this.facts,
      row('Order', el('code', { text: order.orderId })),
      row('Status', order.status),
      row('Paid', `${money(order.stableAmount)} stablecoin B`),
      order.quotedShares ? row('Quoted', `${shares(order.quotedShares)} ${order.symbol} (at least ${shares(order.minimumShares)})`) : null,
      order.requotedShares ? row('Re-quoted before the swap', `${shares(order.requotedShares)} ${order.symbol}`) : null,
      order.delivered ? row('Delivered', `${shares(order.delivered, 18)} ${order.symbol}`) : null,
    );
  }
}

/** The steps as an order's record shows them (or, before there is one, how far the buyer got). */
export function stepsFor(phase: 'quoted' | 'signing' | 'settling', terms: BuyChallenge['terms'], order?: StockOrderView): Step[] {
  const quoteStep: Step = {
    title: 'Quoted on chain',
    state: 'done',
    detail: `About ${shares(terms.estimatedShares)} ${terms.symbol}, at least ${shares(terms.minimumShares)}; total ${money(terms.total.amount)} stablecoin B.`,
  };
  const sign: Step = {
    title: 'Payment signed in your wallet',
    state: phase === 'quoted' ? 'pending' : phase === 'signing' ? 'active' : 'done',
    detail: phase === 'signing' ? 'Confirm the signature in your wallet. No gas is spent.' : undefined,
  };
  const settle: Step = { title: 'Payment settled', state: phase === 'settling' ? 'active' : 'pending', detail: phase === 'settling' ? 'The gateway is settling your payment on chain…' : undefined };
  const swap: Step = { title: 'Swapping on the pool', state: 'pending' };
  const end: Step = { title: 'Delivered to your wallet', state: 'pending' };
  if (order) {
    const s = order.status;
    if (order.settlementTx) Object.assign(settle, { state: 'done', detail: `${money(order.stableAmount)} stablecoin B paid.`, tx: order.settlementTx });
    if (s === 'rejected') Object.assign(settle, { state: 'failed', detail: `${reasonInWords(order.failure?.reason, 'Your payment did not settle.')} Nothing was charged.` });
    if (s === 'checkingPool' || s === 'quoting') Object.assign(swap, { state: 'active', detail: 'Checking the pool and re-quoting on chain…' });
    if (s === 'swapping' || s === 'confirmingSwap') Object.assign(swap, { state: 'active', detail: 'The swap is on its way…', tx: order.swapTx });
    if (s === 'delivered') {
      Object.assign(swap, { state: 'done', detail: `Swapped ${money(order.stableAmount)} stablecoin B on the pinned pool.`, tx: order.swapTx });
      Object.assign(end, { state: 'done', title: `Delivered ${shares(order.delivered)} ${order.symbol}`, detail: `To ${order.recipient}.` });
    }
    if (['refunding', 'refundWaiting', 'confirmingRefund', 'refunded'].includes(s)) {
      Object.assign(swap, { state: 'failed', detail: reasonInWords(order.failure?.reason, 'The swap did not happen.'), tx: order.swapTx });
      Object.assign(
        end,
        s === 'refunded'
          ? { state: 'done', title: `Refunded ${money(order.stableAmount)} stablecoin B`, detail: 'Your payment was sent back to your wallet.', tx: order.refundTx }
          : {
              state: 'active',
              title: 'Refunding your payment',
              detail: s === 'refundWaiting' ? 'The refund could not be sent yet; it is queued and will be retried.' : 'The refund is on its way…',
              tx: order.refundTx,
            },
      );
    }
  }
  return [quoteStep, sign, settle, swap, end];
}

export function ordersTable(orders: StockOrderView[], empty: string, showPayer: boolean): Node {
  if (orders.length === 0) return el('p', { class: 'hint', text: empty });
  const statusWords: Record<string, string> = { delivered: 'delivered', refunded: 'refunded', rejected: 'not settled' };
  return el(
    'ul',
    { class: 'order-list' },
    ...orders.map((o) =>
      el(
        'li',
        { class: `order ${o.status}`, attrs: { 'data-order': o.orderId, 'data-status': o.status } },
        el('span', { class: 'order-main' }, el('strong', { text: o.symbol }), ` ${money(o.stableAmount)} stablecoin B`, o.delivered ? ` → ${shares(o.delivered)} shares` : ''),
        el('span', { class: `badge ${o.status}`, text: statusWords[o.status] ?? 'running' }),
        el('span', { class: 'order-meta' }, showPayer ? `${shortAddress(o.payer)} · ` : '', ago(o.createdAt)),
        o.refundTx ? el('span', { class: 'order-tx' }, 'refund ', txLink(o.refundTx)) : o.swapTx ? el('span', { class: 'order-tx' }, 'swap ', txLink(o.swapTx)) : null,
      ),
    ),
  );
}
