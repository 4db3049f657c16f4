/**
 * The stock purchase page: live prices, the on-chain quote and exact total, the one-time Permit2 approval (with gas
 * sponsorship), the signed payment, the order followed to delivery or refund, the wallet's history and the feed.
 * Everything goes through the public stock API and the injected wallet.
 */
import { api, ApiError, postJson } from './api.ts';
import { clearMessage, guarded, messageOf, mountWalletButton, reportUncaughtErrors, showMessage } from './chrome.ts';
import { erc20, uint } from './chain-calls.ts';
import type { WebPageConfig } from './config.ts';
import { byId, el, pageConfig, replaceChildren } from './dom.ts';
import { ago, cents, fromAtomic, money, parseAmount, shares, shortHash } from './format.ts';
import { paymentSignatureHeader, permitFor } from './permit2.ts';
import { reasonInWords } from './reasons.ts';
import { FINAL_ORDER_STATES, type BuyChallenge, type StockList, type StockOrderView, type StockQuote, type StockRow } from './stock-types.ts';
import { shortAddress, Wallet, WalletError } from './wallet.ts';

type Hex = `0x${string}`;

reportUncaughtErrors();
const config = pageConfig<WebPageConfig>();
const chain = config.stockChain;
const wallet = new Wallet();

const ui = {
  form: byId<HTMLFormElement>('buy-form'),
  symbol: byId<HTMLSelectElement>('symbol'),
  amount: byId<HTMLInputElement>('amount'),
  amountError: byId('amount-error'),
  quote: byId('quote'),
  quoteMessage: byId('quote-message'),
  source: byId('quote-source'),
  walletStatus: byId('wallet-status'),
  setup: byId('setup'),
  setupText: byId('setup-text'),
  sponsor: byId<HTMLButtonElement>('sponsor-button'),
  approve: byId<HTMLButtonElement>('approve-button'),
  setupMessage: byId('setup-message'),
  buy: byId<HTMLButtonElement>('buy-button'),
  buyMessage: byId('buy-message'),
  orderCard: byId('order-card'),
  steps: byId('order-steps'),
  facts: byId('order-facts'),
  prices: byId('prices-body'),
  pricesMessage: byId('prices-message'),
  pricesUpdated: byId('prices-updated'),
  history: byId('history'),
  feed: byId('feed'),
};

interface WalletState {
  chainOk: boolean;
  stable: bigint;
  allowance: bigint;
  gas: bigint;
  /** Wei the approval would cost, when the wallet could estimate it. */
  approvalCost?: bigint;
}

const state: { list?: StockList; quote?: StockQuote; wallet?: WalletState; busy: boolean } = { busy: false };
const LIMITS = { min: 1_000_000n, max: 1_000_000_000n };

function stockOf(symbol: string): StockRow | undefined {
  return state.list?.stocks.find((s) => s.symbol === symbol);
}

function amountInput() {
  return parseAmount(ui.amount.value, LIMITS);
}

// ------------------------------------------------------------------ prices

async function loadPrices(): Promise<void> {
  try {
    const { body } = await api<StockList>('/api/stock/list');
    state.list = body;
    clearMessage(ui.pricesMessage);
  } catch (err) {
    const off = err instanceof ApiError && err.status === 404;
    showMessage(ui.pricesMessage, 'error', off ? 'This gateway does not sell stocks right now (its stock API is turned off).' : messageOf(err));
    return;
  }
  renderPrices();
  ui.pricesUpdated.textContent = `updated ${new Date().toLocaleTimeString()}`;
}

function renderPrices(): void {
  const list = state.list;
  if (!list) return;
  const selected = ui.symbol.value || list.stocks[0]?.symbol || '';
  if (ui.symbol.options.length !== list.stocks.length || ui.symbol.disabled) {
    replaceChildren(ui.symbol, ...list.stocks.map((s) => el('option', { text: `${s.symbol} · ${s.name}`, attrs: { value: s.symbol } })));
    ui.symbol.disabled = false;
    ui.symbol.value = selected;
  }
  replaceChildren(
    ui.prices,
    ...list.stocks.map((s) => {
      const chosen = s.symbol === ui.symbol.value;
      return el(
        'tr',
        { class: chosen ? 'chosen' : '', attrs: { 'data-symbol': s.symbol } },
        el('th', { attrs: { scope: 'row' } }, el('span', { class: 'symbol', text: s.symbol }), el('span', { class: 'name', text: s.name })),
        el('td', {
          class: 'num',
          text: s.priceUsd === null ? 'unavailable' : `$${cents(s.priceUsd)}`,
          title: s.priceUsd === null ? 'the pool could not be read just now' : `${s.priceUsd} USD per share`,
        }),
        el(
          'td',
          { class: 'pick' },
          el('button', {
            class: chosen ? 'small chosen' : 'small',
            text: chosen ? 'Chosen' : 'Choose',
            attrs: { type: 'button', 'aria-pressed': chosen ? 'true' : 'false', 'aria-label': `Choose ${s.symbol}` },
            on: { click: () => choose(s.symbol) },
          }),
        ),
      );
    }),
  );
}

function choose(symbol: string): void {
  ui.symbol.value = symbol;
  renderPrices();
  scheduleQuote(0);
  ui.amount.focus({ preventScroll: true });
  ui.form.scrollIntoView({ behavior: 'smooth', block: 'nearest' });
}

// ------------------------------------------------------------------ quote

let quoteTimer: ReturnType<typeof setTimeout> | undefined;
let quoteSeq = 0;

function scheduleQuote(delayMs = 350): void {
  clearTimeout(quoteTimer);
  quoteTimer = setTimeout(() => void loadQuote(), delayMs);
}

function setQuote(values: { price?: string; estimate?: string; minimum?: string; fees?: string; total?: string }): void {
  byId('q-price').textContent = values.price ?? '–';
  byId('q-shares').textContent = values.estimate ?? '–';
  byId('q-min').textContent = values.minimum ?? '–';
  byId('q-fees').textContent = values.fees ?? '–';
  byId('q-total').textContent = values.total ?? '–';
}

async function loadQuote(): Promise<void> {
  const seq = ++quoteSeq;
  const symbol = ui.symbol.value;
  const amount = amountInput();
  state.quote = undefined;
  if (!amount.ok) {
    ui.amountError.textContent = ui.amount.value.trim() === '' ? 'Enter how much stablecoin B to spend.' : amount.error;
    ui.amount.setAttribute('aria-invalid', 'true');
    setQuote({});
    renderBuyButton();
    return;
  }
  ui.amountError.textContent = '';
  ui.amount.removeAttribute('aria-invalid');
  if (!symbol) return;
  try {
    const { body } = await api<StockQuote>(`/api/stock/quote?symbol=${encodeURIComponent(symbol)}&stable_amount=${amount.decimal}`);
    if (seq !== quoteSeq) return;
    state.quote = body;
    const stock = stockOf(symbol);
    setQuote({
      price: stock?.priceUsd ? `$${cents(stock.priceUsd)} per share` : undefined,
      estimate: `${shares(body.estimatedShares)} ${body.symbol}`,
      minimum: `${shares(body.minimumShares)} ${body.symbol}`,
      fees: body.fees.amount === '0.000000' ? 'none' : `${money(body.fees.amount)} stablecoin B`,
      total: `${money(body.total.amount)} stablecoin B`,
    });
    ui.source.textContent = `Quoted on chain at ${new Date(body.quotedAt).toLocaleTimeString()} (${body.source}). The swap delivers at least the minimum, ${body.slippageBps / 100}% below the quote, or your payment is refunded.`;
    clearMessage(ui.quoteMessage);
  } catch (err) {
    if (seq !== quoteSeq) return;
    setQuote({});
    ui.source.textContent = '';
    showMessage(ui.quoteMessage, 'error', messageOf(err));
  }
  renderBuyButton();
}

// ------------------------------------------------------------------ wallet, approval, sponsorship

async function readWallet(): Promise<void> {
  const address = wallet.address;
  if (!address || !chain) {
    state.wallet = undefined;
    renderWallet();
    return;
  }
  try {
    const chainOk = (await wallet.chainId()) === chain.chainId;
    if (!chainOk) {
      state.wallet = { chainOk, stable: 0n, allowance: 0n, gas: 0n };
    } else if (!state.list) {
      state.wallet = undefined; // read again once the stock list (and so the stablecoin's address) is in
    } else {
      const token = state.list.stablecoin.address;
      const [stable, allowance, gas] = await Promise.all([
        wallet.call(token, erc20.balanceOf(address)).then(uint),
        wallet.call(token, erc20.allowance(address, chain.permit2)).then(uint),
        wallet.balance(address),
      ]);
      const next: WalletState = { chainOk, stable, allowance, gas };
      if (allowance === 0n) next.approvalCost = await approvalCost(address, token).catch(() => undefined);
      state.wallet = next;
    }
    // An earlier failure to read is over; what sponsorship or the approval said stays.
    if (ui.setupMessage.classList.contains('error')) clearMessage(ui.setupMessage);
  } catch (err) {
    state.wallet = undefined;
    showMessage(ui.setupMessage, 'error', messageOf(err));
  }
  renderWallet();
}

async function approvalCost(address: Hex, token: Hex): Promise<bigint> {
  const [gas, price] = await Promise.all([
    wallet.request<Hex>('eth_estimateGas', [{ from: address, to: token, data: erc20.approveMax(chain!.permit2) }], 'estimating the approval'),
    wallet.request<Hex>('eth_gasPrice', [], 'reading the gas price'),
  ]);
  return BigInt(gas) * BigInt(price);
}

function stableText(atomic: bigint): string {
  return `${money(fromAtomic(atomic, 6))} stablecoin B`;
}

function renderWallet(): void {
  const w = state.wallet;
  const address = wallet.address;
  ui.walletStatus.dataset.state = !address ? 'disconnected' : !w ? 'unknown' : !w.chainOk ? 'wrong-chain' : w.allowance === 0n ? 'needs-approval' : 'ready';
  if (!wallet.available) ui.walletStatus.textContent = 'No browser wallet found: install one to buy. Prices and quotes work without it.';
  else if (!address) ui.walletStatus.textContent = 'Connect your wallet to buy. You pay with stablecoin B on the stock chain; no gas needed.';
  else if (!w) ui.walletStatus.textContent = `Wallet ${shortAddress(address)} connected.`;
  else if (!w.chainOk) ui.walletStatus.textContent = `Wallet ${shortAddress(address)} is on another chain; buying switches it to the ${chain?.name ?? 'stock chain'}.`;
  else ui.walletStatus.textContent = `Wallet ${shortAddress(address)} holds ${stableText(w.stable)}${state.list ? ` (${state.list.stablecoin.symbol})` : ''}.`;

  const needsApproval = Boolean(w?.chainOk && w.allowance === 0n);
  ui.setup.hidden = !needsApproval;
  if (needsApproval && w) {
    const enoughGas = w.approvalCost === undefined ? w.gas > 0n : w.gas >= w.approvalCost;
    ui.sponsor.hidden = enoughGas;
    ui.setupText.textContent = enoughGas
      ? 'Before your first buy, your wallet approves Permit2 to move your stablecoin B: one transaction, once. Every buy after it is a signature only.'
      : 'Before your first buy, your wallet approves Permit2 to move your stablecoin B: one transaction, once. Your wallet has no gas for it, so first ask the gateway for just enough gas (free, once per wallet).';
    ui.approve.disabled = !enoughGas;
  }
  renderBuyButton();
}

async function sponsor(): Promise<void> {
  const address = wallet.requireAddress();
  showMessage(ui.setupMessage, 'progress', 'Asking the gateway for gas…');
  try {
    const { body } = await postJson<{ transaction: string; amountWei: string }>('/api/gas/sponsor', { address }, { timeoutMs: 90_000 });
    showMessage(ui.setupMessage, 'success', 'The gateway sent your wallet gas for the approval ', txLink(body.transaction), '. Now approve stablecoin B.');
  } catch (err) {
    const condition = err instanceof ApiError ? (err.body as { condition?: string } | undefined)?.condition : undefined;
    if (condition === 'already_approved') {
      showMessage(ui.setupMessage, 'info', 'Your wallet has already approved Permit2; no approval is needed.');
    } else if (condition === 'no_stablecoin_b') {
      throw new ApiError(422, 'Your wallet holds no stablecoin B yet. Gas is sponsored only for wallets that hold it: fund your wallet with stablecoin B first.');
    } else if (condition === 'already_sponsored') {
      throw new ApiError(409, 'Your wallet was already given gas once (sponsorship is once per wallet). Add a little gas to it yourself to send the approval.');
    } else {
      throw err;
    }
  }
  await readWallet();
}

async function approve(): Promise<void> {
  if (!chain || !state.list) return;
  showMessage(ui.setupMessage, 'progress', 'Confirm the approval in your wallet…');
  const hash = await wallet.sendTransaction({ to: state.list.stablecoin.address, data: erc20.approveMax(chain.permit2) }, 'the approval');
  showMessage(ui.setupMessage, 'progress', 'Approval sent ', txLink(hash), '; waiting for it to be mined…');
  const ok = await wallet.waitForReceipt(hash);
  if (!ok) throw new WalletError(`The approval transaction ${hash} failed on chain. Try again; your wallet may need a little more gas.`);
  showMessage(ui.setupMessage, 'success', 'Approved ', txLink(hash), '. From now on every buy is a signature only.');
  await readWallet();
}

// ------------------------------------------------------------------ buying

function renderBuyButton(): void {
  const b = ui.buy;
  const w = state.wallet;
  const amount = amountInput();
  b.disabled = false;
  if (state.busy) {
    b.textContent = 'Buying…';
    b.disabled = true;
  } else if (!wallet.available) {
    b.textContent = 'Install a wallet to buy';
    b.disabled = true;
  } else if (!wallet.address) {
    b.textContent = 'Connect wallet to buy';
  } else if (w && !w.chainOk) {
    b.textContent = `Switch to the ${chain?.name ?? 'stock chain'}`;
  } else if (w && w.allowance === 0n) {
    b.textContent = 'Approve stablecoin B first (above)';
    b.disabled = true;
  } else if (!amount.ok || !ui.symbol.value) {
    b.textContent = 'Buy';
    b.disabled = true;
  } else {
    b.textContent = `Buy ${ui.symbol.value} for ${money(amount.decimal)} stablecoin B`;
  }
}

async function onBuyClicked(): Promise<void> {
  clearMessage(ui.buyMessage);
  if (!chain) throw new ApiError(404, 'This gateway does not sell stocks right now (it has no stock chain).');
  if (!wallet.address) {
    await wallet.connect();
    return;
  }
  if (!state.wallet?.chainOk) {
    await wallet.ensureChain({ chainId: chain.chainId, chainName: chain.name, ...(chain.rpcUrl ? { rpcUrl: chain.rpcUrl } : {}) });
    await readWallet();
    return;
  }
  const amount = amountInput();
  if (!amount.ok) throw new ApiError(400, amount.error);
  if (state.wallet.stable < amount.atomic) {
    throw new ApiError(400, `Your wallet holds ${stableText(state.wallet.stable)}; this buy needs ${money(amount.decimal)}. Fund your wallet or buy for less.`);
  }
  state.busy = true;
  renderBuyButton();
  try {
    await buy(ui.symbol.value, amount.decimal, wallet.requireAddress());
  } finally {
    state.busy = false;
    renderBuyButton();
    void readWallet();
    void loadHistory();
    void loadFeed();
  }
}

type StepState = 'pending' | 'active' | 'done' | 'failed';
interface Step {
  title: string;
  state: StepState;
  detail?: string;
  tx?: string;
}

function txLink(hash: string): HTMLElement {
  return el('code', { class: 'tx', text: shortHash(hash), title: hash, attrs: { 'data-tx': hash } });
}

function renderSteps(steps: Step[], status: string): void {
  ui.orderCard.hidden = false;
  ui.orderCard.dataset.status = status;
  replaceChildren(
    ui.steps,
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

/** The steps as an order's record shows them (or, before there is one, how far the buyer got). */
function stepsFor(phase: 'quoted' | 'signing' | 'settling', terms: BuyChallenge['terms'], order?: StockOrderView): Step[] {
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

function renderFacts(order: StockOrderView): void {
  const row = (label: string, value: Node | string) => el('div', {}, el('dt', { text: label }), el('dd', {}, value));
  replaceChildren(
    ui.facts,
    row('Order', el('code', { text: order.orderId })),
    row('Status', order.status),
    row('Paid', `${money(order.stableAmount)} stablecoin B`),
    order.quotedShares ? row('Quoted', `${shares(order.quotedShares)} ${order.symbol} (at least ${shares(order.minimumShares)})`) : null,
    order.requotedShares ? row('Re-quoted before the swap', `${shares(order.requotedShares)} ${order.symbol}`) : null,
    order.delivered ? row('Delivered', `${shares(order.delivered, 18)} ${order.symbol}`) : null,
  );
}

/** The order this buy created, found in the wallet's history while the paid request is still running. */
async function findNewOrder(payer: Hex, known: Set<string>, symbol: string, atomic: string): Promise<StockOrderView | undefined> {
  const { body } = await api<{ orders: StockOrderView[] }>(`/api/stock/orders?payer=${payer}&limit=5`);
  return body.orders.find((o) => !known.has(o.orderId) && o.symbol === symbol && o.amountAtomic === atomic);
}

async function buy(symbol: string, amount: string, payer: Hex): Promise<void> {
  if (!chain) return;
  const query = `symbol=${encodeURIComponent(symbol)}&stable_amount=${amount}`;
  showMessage(ui.buyMessage, 'progress', 'Getting the on-chain quote and the payment terms…');
  const challenge = await api<BuyChallenge>(`/api/stock/buy?${query}`, { method: 'POST', expect: [402] });
  if (challenge.status !== 402) throw new ApiError(challenge.status, 'The gateway did not ask for a payment; nothing was charged. Try again.');
  const terms = challenge.body.terms;
  const offer = challenge.body.accepts[0];
  if (!offer || !terms) throw new ApiError(402, 'The gateway sent no payment terms this page understands; nothing was charged.');
  if (offer.network !== chain.caip2) throw new ApiError(402, `The gateway asks for payment on ${offer.network}, not on the ${chain.name}; nothing was charged.`);

  renderSteps(stepsFor('signing', terms), 'signing');
  showMessage(ui.buyMessage, 'progress', `Sign the payment of ${money(terms.total.amount)} stablecoin B in your wallet.`);
  const permit = permitFor(offer, payer, chain.permit2, Math.floor(Date.now() / 1000));
  const signature = await wallet.signTypedData(permit.typedData, 'the payment signature').catch((err: unknown) => {
    renderSteps(stepsFor('quoted', terms), 'declined');
    throw err;
  });

  const known = new Set((await api<{ orders: StockOrderView[] }>(`/api/stock/orders?payer=${payer}&limit=5`).catch(() => ({ body: { orders: [] } }))).body.orders.map((o) => o.orderId));
  renderSteps(stepsFor('settling', terms), 'settling');
  showMessage(ui.buyMessage, 'progress', 'Payment signed. The gateway settles it, then swaps on the pool…');

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
        renderSteps(stepsFor('settling', terms, found), found.status);
        renderFacts(found);
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
    renderSteps(stepsFor('quoted', terms), 'refused');
    throw new ApiError(
      402,
      `${answer.body.error ? `${answer.body.error.charAt(0).toUpperCase()}${answer.body.error.slice(1)}` : 'The payment was not accepted; nothing was charged'}. Try the buy again.`,
    );
  }
  // Still running (202), or placed by a concurrent request (409): follow the order until it is over.
  while (order && !FINAL_ORDER_STATES.has(order.status)) {
    renderSteps(stepsFor('settling', terms, order), order.status);
    renderFacts(order);
    showMessage(ui.buyMessage, 'progress', order.status.startsWith('refund') || order.status === 'confirmingRefund' ? 'Delivery failed; your refund is on its way…' : 'Your order is still running…');
    await new Promise((r) => setTimeout(r, 1000));
    order = (await api<StockOrderView>(`/api/stock/order/${encodeURIComponent(order.orderId)}`)).body;
  }
  if (!order) {
    throw new ApiError(answer.status, `${answer.body.error ?? 'The gateway did not say what became of the order'}. Look for it in your orders below before paying again.`);
  }
  renderSteps(stepsFor('settling', terms, order), order.status);
  renderFacts(order);
  if (order.status === 'delivered') {
    const stock = stockOf(order.symbol);
    const held = stock
      ? await wallet
          .call(stock.address, erc20.balanceOf(order.recipient))
          .then(uint)
          .catch(() => undefined)
      : undefined;
    showMessage(
      ui.buyMessage,
      'success',
      `Delivered ${shares(order.delivered)} ${order.symbol} to your wallet.`,
      held !== undefined && stock ? ` It now holds ${shares(fromAtomic(held, stock.decimals))} ${order.symbol}.` : '',
    );
  } else if (order.status === 'refunded') {
    showMessage(
      ui.buyMessage,
      'error',
      `Not bought. ${reasonInWords(order.failure?.reason, 'The swap did not happen.')} Your ${money(order.stableAmount)} stablecoin B was refunded in `,
      txLink(order.refundTx ?? ''),
      '.',
    );
  } else {
    showMessage(ui.buyMessage, 'error', `Your payment did not settle. ${reasonInWords(order.failure?.reason, 'The gateway refused it.')} Nothing was charged.`);
  }
}

// ------------------------------------------------------------------ history and feed

function ordersTable(orders: StockOrderView[], empty: string, showPayer: boolean): Node {
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

async function loadHistory(): Promise<void> {
  const address = wallet.address;
  if (!address) {
    replaceChildren(ui.history, el('p', { class: 'hint', text: 'Connect your wallet to see your orders.' }));
    return;
  }
  try {
    const { body } = await api<{ orders: StockOrderView[] }>(`/api/stock/orders?payer=${address}&limit=20`);
    replaceChildren(ui.history, ordersTable(body.orders, 'No orders from this wallet yet.', false));
  } catch (err) {
    replaceChildren(ui.history, el('p', { class: 'message error', text: messageOf(err) }));
  }
}

async function loadFeed(): Promise<void> {
  try {
    const { body } = await api<{ orders: StockOrderView[] }>('/api/stock/orders?limit=10');
    replaceChildren(ui.feed, ordersTable(body.orders, 'No orders yet.', true));
  } catch (err) {
    const off = err instanceof ApiError && err.status === 404;
    replaceChildren(ui.feed, el('p', { class: 'message error', text: off ? 'This gateway does not sell stocks right now.' : messageOf(err) }));
  }
}

// ------------------------------------------------------------------ wiring

ui.symbol.addEventListener('change', () => {
  renderPrices();
  scheduleQuote(0);
});
ui.amount.addEventListener('input', () => {
  renderBuyButton();
  scheduleQuote();
});
ui.form.addEventListener('submit', (e) => {
  e.preventDefault();
  void guarded(undefined, ui.buyMessage, onBuyClicked);
});
ui.sponsor.addEventListener('click', () => void guarded(ui.sponsor, ui.setupMessage, sponsor));
ui.approve.addEventListener('click', () => void guarded(ui.approve, ui.setupMessage, approve));
mountWalletButton(wallet, () => {
  void readWallet();
  void loadHistory();
});

const every = (ms: number, fn: () => Promise<void>) =>
  setInterval(() => {
    if (document.visibilityState === 'visible' && !state.busy) void fn();
  }, ms);

renderWallet();
void loadPrices().then(() => {
  scheduleQuote(0);
  void readWallet();
});
void loadFeed();
every(15_000, async () => {
  await loadPrices();
  await loadQuote();
});
every(10_000, loadFeed);
