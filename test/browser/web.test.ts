/**
 * The web front end in a real browser (Debian's Chromium driven by playwright-core) against gateways on the test
 * devnet, with a test wallet injected into the page (EIP-1193, signing in Node with a fresh devnet key):
 * a gasless buyer's first stock buy end to end, a refund forced by moving the pool, errors shown in words, a merchant
 * registered and updated by signature, and every page at desktop and phone widths (screenshots in
 * test-output/screenshots/).
 */
import t, { type Test } from 'tap';
import { formatUnits, parseUnits } from 'viem';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { clientsFor, freshAccount, network, tester, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { fundedPayer, stableBalance } from '../helpers/payments.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { buyInPool, gassedKey, tokenBalance } from '../helpers/stock.ts';
import {
  drawnSize,
  fitsViewportWidth,
  hiddenButDrawn,
  horizontalOverflow,
  injectWallet,
  launchChromium,
  newContext,
  screenshot,
  watchPageProblems,
  type TestWallet,
  type ViewportName,
} from '../helpers/browser.ts';

const manifest = testDevnet();
const n = network(manifest, CAIP2.stockChain);
const funder = tester('web');
const stock = (symbol: string) => {
  const s = n.stocks?.find((x) => x.symbol === symbol);
  if (!s) throw new Error(`the devnet lists no ${symbol}`);
  return s;
};
/** Generous but bounded: the machine is shared, and a buy is three transactions. */
const STEP_MS = 60_000;

const gatewayEnv = async (extra: Record<string, string> = {}) => ({
  GATE402_STOCK_ENABLED: 'true',
  GATE402_STOCK_DESK_KEY: await gassedKey(n),
  GATE402_RELAYER_KEYS: await gassedKey(n),
  GATE402_CONFIRM_DEADLINE_MS: '30000',
  // The merchant page registers an upstream on the discard port, which the devnet does not allow by itself.
  GATE402_UPSTREAM_ALLOWLIST: '127.0.0.1:9',
  ...extra,
});
const [gw, tight, browser] = await Promise.all([
  spawnFacilitator({ part: 'gateway', manifestPath: TEST_MANIFEST_PATH, env: await gatewayEnv() }),
  // The refund test's gateway: its floor is 1 basis point below the quote, so a small trade (a few basis points,
  // harmless to the other tests' orders on the shared pools, whose floor is 1%) forces a refund.
  spawnFacilitator({ part: 'gateway', manifestPath: TEST_MANIFEST_PATH, env: await gatewayEnv({ GATE402_STOCK_SLIPPAGE_BPS: '1' }) }),
  launchChromium(),
]);
t.teardown(async () => {
  await browser.close();
  await Promise.all([gw.stop(), tight.stop()]);
});

interface Opened {
  context: BrowserContext;
  page: Page;
  problems: string[];
}

async function open(b: Browser, viewport: ViewportName, url: string, wallet?: TestWallet): Promise<Opened> {
  const context = await newContext(b, viewport);
  context.setDefaultTimeout(STEP_MS);
  if (wallet) await injectWallet(context, n, wallet);
  const page = await context.newPage();
  const problems = watchPageProblems(page);
  await page.goto(url);
  return { context, page, problems };
}

type Order = { orderId: string; status: string; deliveredAtomic?: string; refundTx?: string; settlementTx?: string; swapTx?: string };
async function orderOf(base: string, id: string): Promise<Order> {
  return (await (await fetch(`${base}/api/stock/order/${id}`)).json()) as Order;
}

/** Picks a stock and an amount, and waits for the quote's exact total (`total` as the page writes it). */
async function chooseAndQuote(t: Test, page: Page, symbol: string, amount: string, total: string): Promise<void> {
  await page.locator('#symbol').selectOption(symbol);
  await page.locator('#amount').fill(amount);
  await t.resolves(
    page
      .locator('#q-total')
      .filter({ hasText: `${total} stablecoin B` })
      .waitFor(),
    `the exact total, ${total}, is quoted on chain`,
  );
}

t.test('a gasless buyer buys NVDA in the browser: gas sponsorship, the one approval, a signed payment, delivery on chain', async (t) => {
  const buyer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('20', 6), { approvePermit2: false });
  const wallet: TestWallet = { account: buyer, calls: [] };
  const { context, page, problems } = await open(browser, 'desktop', `${gw.url}/`, wallet);
  t.teardown(() => context.close());
  const { pub } = clientsFor(n, buyer);
  t.equal(await pub.getBalance({ address: buyer.address }), 0n, 'the buyer starts with no gas and no approval');

  await t.resolves(page.locator('#prices-body tr').nth(13).waitFor(), 'fourteen live prices');
  t.match(await page.locator('#prices-body tr[data-symbol="NVDA"] .num').textContent(), /^\$\d+\.\d{2}$/, 'NVDA has a price in dollars');
  await page.locator('#connect').click();
  await t.resolves(
    page
      .locator('#connect')
      .filter({ hasText: buyer.address.slice(0, 6) })
      .waitFor(),
    'the header shows the connected wallet',
  );
  await t.resolves(page.locator('#wallet-status').filter({ hasText: '20.00' }).waitFor(), 'the page reads the stablecoin B balance through the wallet');
  await t.resolves(page.locator('#setup').waitFor(), 'without an approval, the one-time setup is offered');
  t.equal(await page.locator('#buy-button').isDisabled(), true, 'and buying waits for it');

  await page.locator('#sponsor-button').click();
  await t.resolves(page.locator('#setup-message.success').filter({ hasText: 'gas' }).waitFor(), 'gas sponsorship is shown as done');
  t.ok((await pub.getBalance({ address: buyer.address })) > 0n, 'the wallet received gas');
  await page.locator('#approve-button').click();
  await t.resolves(page.locator('#setup').waitFor({ state: 'hidden' }), 'after the approval the setup disappears');

  await chooseAndQuote(t, page, 'NVDA', '7.5', '7.50');
  const stableBefore = await stableBalance(n, buyer.address);
  await t.resolves(page.locator('#buy-button').filter({ hasText: 'Buy NVDA for 7.50 stablecoin B' }).waitFor(), 'the button says what will be bought and for how much');
  await page.locator('#buy-button').click();
  await t.resolves(page.locator('#order-card[data-status="delivered"]').waitFor(), 'the order is followed to delivery');
  t.match(await page.locator('#buy-message.success').textContent(), /Delivered [\d.]+ NVDA to your wallet\. It now holds [\d.]+ NVDA\./, 'the page says what arrived');

  const id = await page.locator('#history [data-order]').first().getAttribute('data-order');
  const order = await orderOf(gw.url, id ?? '');
  t.equal(order.status, 'delivered', "the wallet's history lists the delivered order");
  const held = await tokenBalance(n, stock('NVDA').address, buyer.address);
  t.ok(held > 0n, 'NVDA is in the wallet on chain');
  t.equal(held.toString(), order.deliveredAtomic, 'exactly the delivered amount');
  t.equal(stableBefore - (await stableBalance(n, buyer.address)), 7_500_000n, '7.5 stablecoin B left the wallet');
  t.equal(
    await page
      .locator('#order-facts dd')
      .filter({ hasText: formatUnits(held, stock('NVDA').decimals) })
      .count(),
    1,
    'the page shows the delivered amount to the last unit',
  );
  for (const tx of [order.settlementTx, order.swapTx]) t.equal(await page.locator(`#order-steps [data-tx="${tx}"]`).count(), 1, `the steps name transaction ${tx}`);
  await t.resolves(page.locator(`#feed [data-order="${id}"]`).waitFor(), 'the global feed lists it');
  t.same(
    wallet.calls.filter((m) => ['eth_requestAccounts', 'eth_sendTransaction', 'eth_signTypedData_v4'].includes(m)),
    ['eth_requestAccounts', 'eth_sendTransaction', 'eth_signTypedData_v4'],
    'the wallet was asked to connect, to send the one approval and to sign one payment; nothing else was sent',
  );
  await screenshot(page, 'stock-delivered-desktop');
  t.same(await hiddenButDrawn(page), [], 'after delivery, nothing marked hidden is drawn (the setup that disappeared, the empty alert bar)');
  t.same(problems, [], 'no page error, no console error (a CSP violation would be one)');
});

t.test('the pool price moves between quote and swap: the page shows the refund and its transaction', async (t) => {
  const amd = stock('AMD');
  const buyer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('50', 6));
  const wallet: TestWallet = {
    account: buyer,
    calls: [],
    beforeSign: async (type) => {
      if (type === 'PermitWitnessTransferFrom') t.equal((await buyInPool(n, funder, amd, parseUnits('2000', 6))).status, 'success', 'a trader buys AMD after the quote');
    },
  };
  const { context, page, problems } = await open(browser, 'phone', `${tight.url}/`, wallet);
  t.teardown(() => context.close());
  await page.locator('#connect').click();
  await t.resolves(page.locator('#wallet-status').filter({ hasText: '50.00' }).waitFor(), 'an approved wallet is ready');
  t.equal(await page.locator('#setup').isVisible(), false, 'no setup is offered to an approved wallet');
  await chooseAndQuote(t, page, 'AMD', '20', '20.00');
  const before = await stableBalance(n, buyer.address);
  await page.locator('#buy-button').click();
  await t.resolves(page.locator('#order-card[data-status="refunded"]').waitFor(), 'the order ends refunded');
  const message = await page.locator('#buy-message.error').textContent();
  t.match(message, /pool price moved against you/, 'the page says why, in words');
  const id = await page.locator('#history [data-order]').first().getAttribute('data-order');
  const order = await orderOf(tight.url, id ?? '');
  t.equal(order.status, 'refunded');
  t.match(order.refundTx, /^0x[0-9a-f]{64}$/, 'the order has a refund transaction');
  t.equal(await page.locator(`#order-steps [data-tx="${order.refundTx}"]`).count(), 1, 'the page shows the refund transaction in full');
  t.equal(await page.locator(`#buy-message [data-tx="${order.refundTx}"]`).count(), 1, 'and names it in the message');
  t.equal((await clientsFor(n, buyer).pub.getTransactionReceipt({ hash: order.refundTx as `0x${string}` })).status, 'success', 'the refund is on chain');
  t.equal(await stableBalance(n, buyer.address), before, 'the stablecoin B balance is restored');
  t.equal(await tokenBalance(n, amd.address, buyer.address), 0n, 'no stock was delivered');
  t.equal(await page.locator('#history [data-status="refunded"]').count(), 1, 'the history marks it refunded');
  await screenshot(page, 'stock-refunded-phone');
  t.same(await hiddenButDrawn(page), [], 'after the refund, nothing marked hidden is drawn');
  t.same(problems, [], 'no page error, no console error');
});

t.test('mistakes and refusals are shown in words', async (t) => {
  const buyer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('3', 6));
  const wallet: TestWallet = {
    account: buyer,
    calls: [],
    beforeSign: async () => {
      throw Object.assign(new Error('User rejected the request.'), { code: 4001 });
    },
  };
  const { context, page } = await open(browser, 'desktop', `${gw.url}/`, wallet);
  t.teardown(() => context.close());
  await page.locator('#connect').click();
  await page.locator('#wallet-status').filter({ hasText: '3.00' }).waitFor();
  await page.locator('#amount').fill('0.5');
  await t.resolves(page.locator('#amount-error').filter({ hasText: 'Enter an amount from 1 to 1000.' }).waitFor(), 'an amount below the limit is explained');
  t.equal(await page.locator('#buy-button').isDisabled(), true, 'and cannot be bought');
  await chooseAndQuote(t, page, 'MSFT', '5', '5.00');
  await page.locator('#buy-button').click();
  await t.resolves(
    page.locator('#buy-message.error').filter({ hasText: 'Your wallet holds 3.00 stablecoin B; this buy needs 5.00' }).waitFor(),
    'more than the wallet holds is refused before anything is signed',
  );
  await chooseAndQuote(t, page, 'MSFT', '2', '2.00');
  await page.locator('#buy-button').click();
  await t.resolves(page.locator('#buy-message.error').filter({ hasText: 'You declined the payment signature in your wallet; nothing happened.' }).waitFor(), 'a declined signature is explained');
  t.equal(await stableBalance(n, buyer.address), 3_000_000n, 'and nothing was charged');
});

t.test('a merchant registers and updates its listing by wallet signature; the marketplace lists it', async (t) => {
  const owner = freshAccount();
  const slug = `web-${owner.address.slice(2, 10).toLowerCase()}`;
  const { context, page, problems } = await open(browser, 'desktop', `${gw.url}/merchant`, { account: owner, calls: [] });
  t.teardown(() => context.close());
  await page.locator('#connect').click();
  await t.resolves(page.locator('#payto').filter({ hasText: owner.address }).waitFor(), 'the payout wallet is the connected one');
  await page.locator('#slug').fill(slug);
  await page.locator('#name').fill('Web test API');
  await page.locator('#description').fill('Registered from the browser test.');
  await page.locator('#base-url').fill('http://127.0.0.1:9/api');
  await page.locator('[data-field="route"]').fill('hello');
  await page.locator('[data-field="price"]').fill('0.02');
  await page.locator('[data-field="summary"]').fill('Says hello');
  await page.locator('#sign-button').click();
  await t.resolves(page.locator('#merchant-message.success').filter({ hasText: 'Registered "Web test API"' }).waitFor(), 'registered');
  const registered = (await (await fetch(`${gw.url}/api/merchants/${slug}`)).json()) as { merchant: { payTo: string; routes: Array<{ route: string; priceUsd: string }> } };
  t.equal(registered.merchant.payTo.toLowerCase(), owner.address.toLowerCase(), 'paid to the signing wallet');
  t.same(
    registered.merchant.routes.map((r) => [r.route, r.priceUsd]),
    [['hello', '0.020000']],
    'with its route and price',
  );

  await page.locator('[data-field="price"]').fill('0.03');
  await page.locator('#base-url').fill('http://127.0.0.1:9/api');
  await t.resolves(
    page
      .locator('#sign-button')
      .filter({ hasText: `Sign and update ${slug}` })
      .waitFor(),
    'the form now updates the listing',
  );
  await page.locator('#sign-button').click();
  await t.resolves(page.locator('#merchant-message.success').filter({ hasText: 'Updated' }).waitFor(), 'updated');
  const updated = (await (await fetch(`${gw.url}/api/merchants/${slug}`)).json()) as { merchant: { routes: Array<{ priceUsd: string }> } };
  t.equal(updated.merchant.routes[0]?.priceUsd, '0.030000', 'the new price is live');

  // Another wallet cannot take the slug: the gateway's refusal is shown.
  const other = await open(browser, 'desktop', `${gw.url}/merchant`, { account: freshAccount(), calls: [] });
  t.teardown(() => other.context.close());
  await other.page.locator('#connect').click();
  await other.page.locator('#payto').filter({ hasText: '0x' }).waitFor();
  await other.page.locator('#slug').fill(slug);
  await other.page.locator('#load-button').click();
  await t.resolves(other.page.locator('#merchant-message.error').filter({ hasText: 'belongs to another wallet' }).waitFor(), 'loading a listing of another wallet is refused in words');
  await other.page.locator('#name').fill('Squatter');
  await other.page.locator('#base-url').fill('http://127.0.0.1:9/api');
  await other.page.locator('[data-field="route"]').fill('hello');
  await other.page.locator('[data-field="price"]').fill('0.01');
  await other.page.locator('[data-field="summary"]').fill('Mine now');
  await other.page.locator('#sign-button').click();
  await t.resolves(other.page.locator('#merchant-message.error').filter({ hasText: 'The gateway refused the listing' }).waitFor(), "the gateway's refusal of a taken slug is shown");

  await page.goto(`${gw.url}/marketplace`);
  await page.locator('#filter').fill(slug);
  await t.resolves(page.locator('#market-count').filter({ hasText: '1 route from 1 merchant' }).waitFor(), 'the marketplace finds the new merchant');
  const route = page.locator(`[data-merchant="${slug}"] .route`);
  t.equal(await route.locator('.price').textContent(), '$0.03', 'at its new price');
  await route.locator('summary').click();
  const example = `npx gate402 pay '${gw.url}/m/${slug}/hello'`;
  t.equal(await route.locator('.example pre').first().textContent(), example, 'with a paid-request example');
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gw.url });
  await route.locator('.example .copy').first().click();
  await t.resolves(route.locator('.example .copy').first().filter({ hasText: 'Copied' }).waitFor(), 'its Copy button says it copied');
  t.equal(await page.evaluate('navigator.clipboard.readText()'), example, 'and the clipboard holds the command');
  t.same(problems, [], 'no page error, no console error');
});

const PAGES = [
  { name: 'stock', path: '/', ready: '#prices-body tr[data-symbol]', control: '#buy-button' },
  { name: 'market', path: '/marketplace', ready: '.route', control: '.route summary' },
  { name: 'merchant', path: '/merchant', ready: '.route-edit', control: '#sign-button' },
] as const;

t.test('every page at desktop and phone widths: a screenshot, no horizontal overflow, its main control in view, nothing hidden drawn', async (t) => {
  for (const viewport of ['desktop', 'phone'] as const) {
    const context = await newContext(browser, viewport);
    context.setDefaultTimeout(STEP_MS);
    for (const p of PAGES) {
      const page = await context.newPage();
      const problems = watchPageProblems(page);
      await page.goto(`${gw.url}${p.path}`);
      await page.locator(p.ready).first().waitFor();
      if (p.name === 'market') await page.locator('.route summary').first().click();
      const file = await screenshot(page, `${p.name}-${viewport}`);
      t.equal(await horizontalOverflow(page), 0, `${p.name} at ${viewport} width: nothing wider than the screen (${file})`);
      t.ok(await fitsViewportWidth(page, p.control), `${p.name} at ${viewport} width: ${p.control} is on screen`);
      t.ok(await page.locator(p.control).first().isVisible(), `${p.name} at ${viewport} width: ${p.control} is visible`);
      t.same(await hiddenButDrawn(page), [], `${p.name} at ${viewport} width: no element marked hidden is drawn`);
      t.same(await drawnSize(page, '#page-alert'), { width: 0, height: 0 }, `${p.name} at ${viewport} width: with no error, no alert bar is drawn under the navigation`);
      t.same(problems, [], `${p.name} at ${viewport} width: no page or console error`);
      await page.close();
    }
    await context.close();
  }
});

t.test('an error that belongs to no form shows the alert bar in words; Dismiss hides it again', async (t) => {
  const { context, page } = await open(browser, 'phone', `${gw.url}/marketplace`);
  t.teardown(() => context.close());
  await page.locator('.route').first().waitFor();
  t.equal(await page.locator('#page-alert').isVisible(), false, 'no error, no bar');
  // What an uncaught error in the page does (reportUncaughtErrors listens for it), without a real fault in the page.
  await page.evaluate(`window.dispatchEvent(new ErrorEvent('error', { message: 'the prices could not be read' }))`);
  const bar = page.locator('#page-alert');
  await t.resolves(bar.filter({ hasText: 'the prices could not be read' }).waitFor(), 'the bar shows the error in words');
  const shown = await drawnSize(page, '#page-alert');
  t.ok(shown.width > 300 && shown.height > 10, `and is drawn (${shown.width}x${shown.height})`);
  await screenshot(page, 'alert-phone');
  await bar.locator('button', { hasText: 'Dismiss' }).click();
  await t.resolves(bar.waitFor({ state: 'hidden' }), 'Dismiss hides it');
  t.same(await drawnSize(page, '#page-alert'), { width: 0, height: 0 }, 'and leaves no band behind');
  t.same(await hiddenButDrawn(page), [], 'nothing marked hidden is drawn');
});

t.test('pages are served with a strict CSP, revalidated, gzipped; assets are immutable', async (t) => {
  const res = await fetch(`${gw.url}/`, { headers: { 'accept-encoding': 'gzip' } });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/html; charset=utf-8$/);
  t.match(res.headers.get('content-security-policy'), /default-src 'none'; script-src 'self'; style-src 'self'/, 'no inline script or style allowed');
  t.equal(res.headers.get('cache-control'), 'no-cache', 'the page is revalidated');
  t.equal(res.headers.get('content-encoding'), 'gzip', 'and gzipped');
  const html = await res.text();
  const etag = res.headers.get('etag') ?? '';
  t.equal((await fetch(`${gw.url}/`, { headers: { 'if-none-match': etag } })).status, 304, 'unchanged: 304');
  const script = /<script type="module" src="(\/assets\/stock-[A-Z0-9]+\.js)">/.exec(html)?.[1];
  const style = /<link rel="stylesheet" href="(\/assets\/style-[A-Z0-9]+\.css)">/.exec(html)?.[1];
  t.ok(script && style, 'the page names its hashed script and stylesheet');
  for (const [path, type] of [
    [script, 'text/javascript; charset=utf-8'],
    [style, 'text/css; charset=utf-8'],
  ] as const) {
    const a = await fetch(`${gw.url}${path}`);
    t.equal(a.headers.get('content-type'), type, `${path}: ${type}`);
    t.equal(a.headers.get('cache-control'), 'public, max-age=31536000, immutable', `${path}: cached for a year`);
    t.ok((await a.arrayBuffer()).byteLength < 60_000, `${path}: small`);
  }
  const missing = await fetch(`${gw.url}/assets/stock-OLD.js`);
  t.equal(missing.status, 404, 'an unknown asset is a 404');
});
