/**
 * The HTML of the three pages: a shell (header, navigation, wallet button, alert bar) around each page's static
 * markup, which its script (`client/<page>.ts`) brings to life. No inline script or style: the Content-Security-Policy
 * allows only this origin's files. The page's configuration travels as a JSON data block, which is never executed.
 */
import type { PageAssets, PageName } from './bundle.ts';
import type { WebPageConfig } from './client/config.ts';

export interface PageDefinition {
  path: string;
  title: string;
  description: string;
  nav: string;
  main: string;
}

/** `text` safe inside HTML text and double-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** JSON that cannot end the `<script>` element it sits in. */
function jsonBlock(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
}

const STOCK_MAIN = `
<main id="main" class="page stock-page">
  <div class="col-side">
    <section class="card buy-card" aria-labelledby="buy-title">
      <h1 id="buy-title">Buy a tokenized stock</h1>
      <p class="lead">Pay with stablecoin B by one signature: no gas, no account. The stock arrives in your wallet, or your payment comes back.</p>
      <form id="buy-form" novalidate>
        <div class="field">
          <label for="symbol">Stock</label>
          <select id="symbol" name="symbol" disabled><option value="">Loading the stocks…</option></select>
        </div>
        <div class="field">
          <label for="amount">Amount to spend</label>
          <div class="with-unit"><input id="amount" name="amount" inputmode="decimal" autocomplete="off" spellcheck="false" value="5" aria-describedby="amount-hint amount-error"><span class="unit">stablecoin B</span></div>
          <p id="amount-hint" class="hint">From 1 to 1000, up to 6 decimals.</p>
          <p id="amount-error" class="field-error" aria-live="polite"></p>
        </div>
        <dl id="quote" class="quote" aria-live="polite">
          <div><dt>Price</dt><dd id="q-price">–</dd></div>
          <div><dt>You get about</dt><dd id="q-shares">–</dd></div>
          <div><dt>At least</dt><dd id="q-min">–</dd></div>
          <div><dt>Fees</dt><dd id="q-fees">–</dd></div>
          <div class="total"><dt>Total charged</dt><dd id="q-total">–</dd></div>
        </dl>
        <p id="quote-source" class="hint source"></p>
        <div id="quote-message" class="message" role="alert" hidden></div>
        <div id="setup" class="setup" hidden>
          <h2>One-time setup</h2>
          <p id="setup-text"></p>
          <div class="actions">
            <button type="button" id="sponsor-button" class="secondary">Get gas for it (free, once)</button>
            <button type="button" id="approve-button" class="secondary">Approve stablecoin B</button>
          </div>
        </div>
        <div id="setup-message" class="message" role="status" aria-live="polite" hidden></div>
        <p id="wallet-status" class="wallet-status hint" aria-live="polite"></p>
        <button id="buy-button" type="submit" class="primary wide">Connect wallet to buy</button>
        <div id="buy-message" class="message" role="status" aria-live="polite" hidden></div>
      </form>
    </section>
    <section class="card order-card" id="order-card" hidden aria-labelledby="order-title">
      <h2 id="order-title">Your order</h2>
      <ol id="order-steps" class="steps"></ol>
      <dl id="order-facts" class="facts"></dl>
    </section>
  </div>
  <div class="col-main">
    <section class="card" aria-labelledby="prices-title">
      <div class="card-head"><h2 id="prices-title">Live prices</h2><span id="prices-updated" class="hint"></span></div>
      <p class="hint">Read from each stock's pinned pool on the stock chain. Fees: none. Orders from 1 to 1000 stablecoin B.</p>
      <div id="prices-message" class="message" role="alert" hidden></div>
      <div class="table-wrap">
        <table class="prices">
          <thead><tr><th scope="col">Stock</th><th scope="col" class="num">Price</th><th scope="col" class="pick"><span class="sr-only">Choose</span></th></tr></thead>
          <tbody id="prices-body"><tr><td colspan="3" class="hint">Loading live prices…</td></tr></tbody>
        </table>
      </div>
    </section>
    <section class="card" aria-labelledby="history-title">
      <h2 id="history-title">Your orders</h2>
      <div id="history" class="orders" aria-live="polite"><p class="hint">Connect your wallet to see your orders.</p></div>
    </section>
    <section class="card" aria-labelledby="feed-title">
      <h2 id="feed-title">Latest orders, everyone</h2>
      <div id="feed" class="orders" aria-live="polite"><p class="hint">Loading…</p></div>
    </section>
  </div>
</main>`;

const MARKET_MAIN = `
<main id="main" class="page market-page">
  <section class="intro" aria-labelledby="market-title">
    <h1 id="market-title">Marketplace</h1>
    <p class="lead">APIs paid per request over HTTP 402, in stablecoins, straight to each merchant's wallet. A program with a wallet calls them: no account, no API key. Copy an example to try one.</p>
    <div class="toolbar">
      <label for="filter" class="sr-only">Filter the routes</label>
      <input id="filter" type="search" placeholder="Filter by merchant, route or words" autocomplete="off">
      <span id="market-count" class="hint" aria-live="polite"></span>
    </div>
    <p class="hint">Machine-readable: <a href="/openapi.json">/openapi.json</a> (every merchant) · <a href="/.well-known/x402">/.well-known/x402</a> · <a href="/merchant">list your own API</a></p>
    <div id="market-message" class="message" role="alert" hidden></div>
  </section>
  <div id="merchants" class="merchants"><p class="hint">Loading the discovery index…</p></div>
  <section class="card channel-lookup" aria-labelledby="channel-title">
    <h2 id="channel-title">Your payment channel</h2>
    <p class="hint">Paying through a channel (<code>batch-settlement</code>)? Its id (the key in the channels file of <code>npx gate402 pay --scheme batch-settlement</code>) shows what you deposited, spent and have left.</p>
    <form id="channel-form" class="inline" novalidate>
      <label for="channel-id" class="sr-only">Channel id</label>
      <input id="channel-id" name="channel-id" autocomplete="off" spellcheck="false" placeholder="0x… (64 hexadecimal digits)">
      <button type="submit" id="channel-show" class="secondary">Show</button>
    </form>
    <div id="channel-message" class="message" role="alert" hidden></div>
    <dl id="channel-view" class="facts channel-view" aria-live="polite" hidden></dl>
  </section>
</main>`;

const MERCHANT_MAIN = `
<main id="main" class="page merchant-page">
  <section class="intro" aria-labelledby="merchant-title">
    <h1 id="merchant-title">List your API</h1>
    <p class="lead">Put your API (or a file) behind the gateway and be paid per request, straight to your wallet. Your wallet signs the listing: no account, no password. The upstream address and its secret headers are never shown to buyers.</p>
    <div id="mine" class="mine" aria-live="polite"></div>
  </section>
  <form id="merchant-form" class="card merchant-form" novalidate>
    <fieldset>
      <legend>Merchant</legend>
      <div class="field">
        <label for="slug">Slug (your address on the gateway: /m/<em>slug</em>/…)</label>
        <div class="inline"><input id="slug" name="slug" autocomplete="off" spellcheck="false" placeholder="my-api" aria-describedby="slug-hint"><button type="button" id="load-button" class="secondary">Load to update</button></div>
        <p id="slug-hint" class="hint">3 to 40 lower-case letters, digits or hyphens.</p>
      </div>
      <div class="field"><label for="name">Name</label><input id="name" name="name" maxlength="80" autocomplete="off"></div>
      <div class="field"><label for="description">Description</label><textarea id="description" name="description" rows="3" maxlength="2000"></textarea></div>
      <div class="field"><span class="label">Payout wallet</span><p id="payto" class="payto hint">Connect your wallet: it receives the payments and signs the listing.</p></div>
      <div class="field"><span class="label" id="networks-label">Accept payment on</span><div id="networks" class="checks" role="group" aria-labelledby="networks-label"></div></div>
    </fieldset>
    <fieldset>
      <legend>Upstream</legend>
      <div class="checks" role="radiogroup" aria-label="Upstream kind">
        <label><input type="radio" name="upstream-kind" value="url" checked> An API (URL)</label>
        <label><input type="radio" name="upstream-kind" value="file"> A file</label>
      </div>
      <div id="upstream-url">
        <div class="field"><label for="base-url">Base URL</label><input id="base-url" type="url" placeholder="https://api.example.com/v1" autocomplete="off" spellcheck="false"></div>
        <div class="field"><span class="label">Secret headers (sent to your API only)</span><div id="headers" class="rows"></div><button type="button" id="add-header" class="secondary small">Add a header</button></div>
      </div>
      <div id="upstream-file" hidden>
        <div class="field"><label for="file">File</label><input id="file" type="file"></div>
        <div class="field"><label for="content-type">Content type</label><input id="content-type" placeholder="application/json" autocomplete="off"></div>
      </div>
      <p class="hint">When you update a listing, give the upstream again: the gateway never shows it back.</p>
    </fieldset>
    <fieldset>
      <legend>Routes</legend>
      <div id="routes" class="routes-edit"></div>
      <button type="button" id="add-route" class="secondary small">Add a route</button>
    </fieldset>
    <button type="submit" id="sign-button" class="primary wide">Connect wallet to sign</button>
    <div id="merchant-message" class="message" role="status" aria-live="polite" hidden></div>
  </form>
</main>`;

export const PAGE_DEFINITIONS: Readonly<Record<PageName, PageDefinition>> = {
  stock: { path: '/', title: 'Buy tokenized stocks', nav: 'Buy stocks', description: 'Buy tokenized stocks with stablecoin B by one signature, gaslessly.', main: STOCK_MAIN },
  market: {
    path: '/marketplace',
    title: 'Marketplace',
    nav: 'Marketplace',
    description: 'Every merchant and route of the gate402 marketplace, with prices, inputs and paid-request examples.',
    main: MARKET_MAIN,
  },
  merchant: { path: '/merchant', title: 'List your API', nav: 'List your API', description: 'Register or update a merchant on the gate402 marketplace with a wallet signature.', main: MERCHANT_MAIN },
};

export function pageHtml(page: PageName, assets: PageAssets, config: WebPageConfig): string {
  const def = PAGE_DEFINITIONS[page];
  const nav = (Object.entries(PAGE_DEFINITIONS) as Array<[PageName, PageDefinition]>)
    .map(([name, d]) => `<a href="${d.path}"${name === page ? ' aria-current="page"' : ''}>${escapeHtml(d.nav)}</a>`)
    .join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(def.title)} · gate402</title>
<meta name="description" content="${escapeHtml(def.description)}">
<meta name="color-scheme" content="light dark">
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${assets.style}">
<script type="module" src="${assets.script}"></script>
<script type="application/json" id="gate402-config">${jsonBlock(config)}</script>
</head>
<body>
<a class="skip" href="#main">Skip to the content</a>
<header class="top">
  <a class="brand" href="/">gate402</a>
  <nav aria-label="Pages">${nav}</nav>
  <button type="button" id="connect" class="connect">Connect wallet</button>
</header>
<div id="page-alert" class="alert" role="alert" hidden></div>
<noscript><p class="alert">These pages need JavaScript to talk to your wallet and the gateway.</p></noscript>
${def.main.trim()}
<footer class="foot"><p>gate402: a non-custodial payment gateway. Payments go straight from your wallet to the seller; the gateway holds no funds.</p></footer>
</body>
</html>
`;
}
