/**
 * The stock purchase page: live prices, the on-chain quote and exact total, the one-time Permit2 approval (with gas
 * sponsorship), the signed payment, the order followed to delivery or refund, the wallet's history and the feed.
 * Everything goes through the public stock API and the injected wallet.
 */
import { api, ApiError, postJson } from './api.ts';
import { clearMessage, guarded, messageOf, mountWalletButton, reportUncaughtErrors, showMessage } from './chrome.ts';
import { erc20 } from './chain-calls.ts';
import type { WebPageConfig } from './config.ts';
import { byId, el, pageConfig, replaceChildren } from './dom.ts';
import { cents, fromAtomic, money, parseAmount, shares } from './format.ts';
import { buy } from './stock-buy.ts';
import { OrderCard, ordersTable, txLink } from './stock-order-view.ts';
import type { StockList, StockOrderView, StockQuote, StockRow } from './stock-types.ts';
import { readWalletState, type WalletState } from './stock-wallet.ts';
import { shortAddress, Wallet, WalletError } from './wallet.ts';

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
const orderCard = new OrderCard(ui.orderCard, ui.steps, ui.facts);

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
    ui.amountError.textContent = ui.amount.value.trim() === '' ? 'Enter how much stablecoin B to spend.' : amount.error.message;
    ui.amount.setAttribute('aria-invalid', 'true');
    setQuote({});
    renderBuyButton();
    return;
  }
  ui.amountError.textContent = '';
  ui.amount.removeAttribute('aria-invalid');
  if (!symbol) return;
  try {
    const { body } = await api<StockQuote>(`/api/stock/quote?symbol=${encodeURIComponent(symbol)}&stable_amount=${amount.value.decimal}`);
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
    state.wallet = await readWalletState(wallet, chain, address, () => state.list?.stablecoin.address);
    // An earlier failure to read is over; what sponsorship or the approval said stays.
    if (ui.setupMessage.classList.contains('error')) clearMessage(ui.setupMessage);
  } catch (err) {
    state.wallet = undefined;
    showMessage(ui.setupMessage, 'error', messageOf(err));
  }
  renderWallet();
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
    b.textContent = `Buy ${ui.symbol.value} for ${money(amount.value.decimal)} stablecoin B`;
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
  if (!amount.ok) throw new ApiError(400, amount.error.message);
  if (state.wallet.stable < amount.value.atomic) {
    throw new ApiError(400, `Your wallet holds ${stableText(state.wallet.stable)}; this buy needs ${money(amount.value.decimal)}. Fund your wallet or buy for less.`);
  }
  state.busy = true;
  renderBuyButton();
  try {
    await buy({ chain, wallet, message: ui.buyMessage, order: orderCard, stockOf }, ui.symbol.value, amount.value.decimal, wallet.requireAddress());
  } finally {
    state.busy = false;
    renderBuyButton();
    void readWallet();
    void loadHistory();
    void loadFeed();
  }
}

// ------------------------------------------------------------------ history and feed

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
