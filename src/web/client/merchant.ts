/**
 * The merchant page: register a merchant, or load one's listing and update it, signed by the payout wallet
 * (`POST /api/merchants`, EIP-712 `MerchantRegistration`, the gateway's own definition of the message).
 */
import { sha256 } from 'viem';
import { REGISTRATION_TYPES, registrationTypedData } from '../../gateway/merchants/registration-typed-data.ts';
import type { Registration, RouteInput, UpstreamInput } from '../../gateway/merchants/types.ts';
import { api, ApiError, postJson } from './api.ts';
import { clearMessage, guarded, messageOf, mountWalletButton, reportUncaughtErrors, showMessage } from './chrome.ts';
import type { WebPageConfig } from './config.ts';
import { base64, hex } from './bytes.ts';
import { byId, el, pageConfig, replaceChildren } from './dom.ts';
import { fromAtomic } from './format.ts';
import { Wallet } from './wallet.ts';

reportUncaughtErrors();
const config = pageConfig<WebPageConfig>();
const wallet = new Wallet();

interface PublicMerchant {
  slug: string;
  name: string;
  description: string;
  payTo: string;
  owner: string;
  networks: string[];
  upstream: { kind: 'url' | 'file' };
  routes: Array<RouteInput & { operationId: string }>;
}

const ui = {
  form: byId<HTMLFormElement>('merchant-form'),
  slug: byId<HTMLInputElement>('slug'),
  load: byId<HTMLButtonElement>('load-button'),
  name: byId<HTMLInputElement>('name'),
  description: byId<HTMLTextAreaElement>('description'),
  payTo: byId('payto'),
  networks: byId('networks'),
  urlBox: byId('upstream-url'),
  fileBox: byId('upstream-file'),
  baseUrl: byId<HTMLInputElement>('base-url'),
  headers: byId('headers'),
  addHeader: byId<HTMLButtonElement>('add-header'),
  file: byId<HTMLInputElement>('file'),
  contentType: byId<HTMLInputElement>('content-type'),
  routes: byId('routes'),
  addRoute: byId<HTMLButtonElement>('add-route'),
  sign: byId<HTMLButtonElement>('sign-button'),
  message: byId('merchant-message'),
  mine: byId('mine'),
};

/** `register` until a listing of this wallet is loaded (or just registered); then `update`. */
let mode: { action: 'register' } | { action: 'update'; slug: string } = { action: 'register' };

const SLUG = /^[a-z0-9](?:[a-z0-9-]{1,38}[a-z0-9])$/;
const ROUTE = /^[a-z0-9][a-z0-9-]{0,62}$/;

function sameAddress(a: string | undefined, b: string | undefined): boolean {
  return Boolean(a && b && a.toLowerCase() === b.toLowerCase());
}

// ------------------------------------------------------------------ the form's repeated rows

function headerRow(name = '', secret = ''): HTMLElement {
  const row = el(
    'div',
    { class: 'row header-row' },
    el('input', { attrs: { 'aria-label': 'Header name', placeholder: 'x-api-key', autocomplete: 'off', spellcheck: 'false', 'data-field': 'header-name' } }),
    el('input', { attrs: { 'aria-label': 'Header value', placeholder: 'secret value', autocomplete: 'off', spellcheck: 'false', type: 'password', 'data-field': 'header-value' } }),
    el('button', { class: 'small link', text: 'Remove', attrs: { type: 'button' }, on: { click: () => row.remove() } }),
  );
  (row.children[0] as HTMLInputElement).value = name;
  (row.children[1] as HTMLInputElement).value = secret;
  return row;
}

let routeCount = 0;
function routeRow(r?: Partial<RouteInput>): HTMLElement {
  const n = ++routeCount;
  const field = (label: string, key: string, input: HTMLInputElement | HTMLTextAreaElement) => {
    input.id = `route-${n}-${key}`;
    input.dataset.field = key;
    return el('div', { class: `field edit-${key}` }, el('label', { text: label, attrs: { for: input.id } }), input);
  };
  const methods = el(
    'div',
    { class: 'field edit-methods' },
    el('span', { class: 'label', text: 'Methods' }),
    el(
      'div',
      { class: 'checks' },
      ...(['GET', 'POST'] as const).map((m) => {
        const box = el('input', { attrs: { type: 'checkbox', value: m, 'data-field': 'method', checked: (r?.methods ?? ['GET']).includes(m) } });
        return el('label', {}, box, ` ${m}`);
      }),
    ),
  );
  const input = (value = '', attrs: Record<string, string> = {}) => {
    const i = el('input', { attrs: { autocomplete: 'off', ...attrs } });
    i.value = value;
    return i;
  };
  const area = (value = '') => {
    const a = el('textarea', { attrs: { rows: '2' } });
    a.value = value;
    return a;
  };
  const row = el(
    'div',
    { class: 'route-edit', attrs: { 'data-route-row': String(n) } },
    field('Route', 'route', input(r?.route, { placeholder: 'forecast', spellcheck: 'false' })),
    methods,
    field('Price per call (USD)', 'price', input(r?.priceUsd ? r.priceUsd.replace(/0+$/, '').replace(/\.$/, '') : '', { inputmode: 'decimal', placeholder: '0.01' })),
    field('Summary', 'summary', input(r?.summary, { maxlength: '200' })),
    field('Description', 'description', area(r?.description)),
    field('Input (in words)', 'input', area(r?.input)),
    el('button', { class: 'small link remove-route', text: 'Remove this route', attrs: { type: 'button' }, on: { click: () => row.remove() } }),
  );
  return row;
}

function renderNetworks(selected?: string[]): void {
  replaceChildren(
    ui.networks,
    ...config.networks.map((n) => {
      const box = el('input', { attrs: { type: 'checkbox', value: n.caip2, checked: selected ? selected.includes(n.caip2) : n.caip2 === config.stockChain?.caip2 || !config.stockChain } });
      return el('label', {}, box, ` ${n.name} `, el('span', { class: 'hint', text: `(${n.caip2}, ${n.stablecoin.symbol})` }));
    }),
  );
}

// ------------------------------------------------------------------ reading the form

/** `"0.01"` → `"0.010000"`: the 6-decimal USD text the registration wants. */
function priceText(raw: string, route: string): string {
  const m = /^(\d{1,4})(?:\.(\d{1,6}))?$/.exec(raw.trim());
  if (!m) throw new ApiError(400, `Route ${route || '(unnamed)'}: give the price in USD, e.g. 0.01 (at most 6 decimals).`);
  const atomic = BigInt(m[1] ?? '0') * 1_000_000n + BigInt((m[2] ?? '').padEnd(6, '0'));
  if (atomic === 0n) throw new ApiError(400, `Route ${route || '(unnamed)'}: the price must be more than zero.`);
  return fromAtomic(atomic, 6);
}

function value(root: ParentNode, field: string): string {
  return (root.querySelector<HTMLInputElement | HTMLTextAreaElement>(`[data-field="${field}"]`)?.value ?? '').trim();
}

function readRoutes(): RouteInput[] {
  const rows = [...ui.routes.querySelectorAll<HTMLElement>('.route-edit')];
  if (rows.length === 0) throw new ApiError(400, 'Add at least one route: a path buyers pay to call.');
  return rows.map((row) => {
    const route = value(row, 'route');
    if (!ROUTE.test(route)) throw new ApiError(400, `Route name ${route ? `"${route}" ` : ''}must be 1 to 63 lower-case letters, digits or hyphens, starting with a letter or digit.`);
    const methods = [...row.querySelectorAll<HTMLInputElement>('[data-field="method"]:checked')].map((b) => b.value as 'GET' | 'POST');
    if (methods.length === 0) throw new ApiError(400, `Route ${route}: choose GET, POST or both.`);
    const summary = value(row, 'summary');
    if (!summary) throw new ApiError(400, `Route ${route}: give a one-line summary of what it returns.`);
    return { route, methods, priceUsd: priceText(value(row, 'price'), route), summary, description: value(row, 'description'), input: value(row, 'input') };
  });
}

async function readUpstream(): Promise<{ upstream: UpstreamInput; fileSha256: (b64: string) => string | undefined }> {
  const kind = ui.form.querySelector<HTMLInputElement>('input[name="upstream-kind"]:checked')?.value;
  if (kind === 'file') {
    const file = ui.file.files?.[0];
    if (!file) throw new ApiError(400, 'Choose the file buyers pay to download.');
    const bytes = new Uint8Array(await file.arrayBuffer());
    if (bytes.length === 0) throw new ApiError(400, 'The file is empty.');
    const contentBase64 = base64(bytes);
    const digest = sha256(bytes).slice(2);
    const contentType = ui.contentType.value.trim() || file.type || 'application/octet-stream';
    return { upstream: { kind: 'file', fileName: file.name, contentType, contentBase64 }, fileSha256: (b64) => (b64 === contentBase64 ? digest : undefined) };
  }
  const baseUrl = ui.baseUrl.value.trim();
  if (!baseUrl) throw new ApiError(400, 'Give the base URL of your API (https://…).');
  const secretHeaders: Record<string, string> = {};
  for (const row of ui.headers.querySelectorAll<HTMLElement>('.header-row')) {
    const name = value(row, 'header-name');
    const v = value(row, 'header-value');
    if (!name && !v) continue;
    if (!name || !v) throw new ApiError(400, 'Each secret header needs a name and a value (or remove the row).');
    secretHeaders[name] = v;
  }
  return { upstream: { kind: 'url', baseUrl, ...(Object.keys(secretHeaders).length ? { secretHeaders } : {}) }, fileSha256: () => undefined };
}

// ------------------------------------------------------------------ actions

function renderSignButton(): void {
  if (!wallet.available) {
    ui.sign.textContent = 'Install a wallet to sign';
    ui.sign.disabled = true;
    return;
  }
  ui.sign.disabled = false;
  ui.sign.textContent = !wallet.address ? 'Connect wallet to sign' : mode.action === 'update' ? `Sign and update ${mode.slug}` : 'Sign and register';
  if (wallet.address) replaceChildren(ui.payTo, el('code', { text: wallet.address }), ' receives the payments and signs the listing.');
  else ui.payTo.textContent = 'Connect your wallet: it receives the payments and signs the listing.';
}

function setMode(next: typeof mode): void {
  mode = next;
  ui.slug.readOnly = next.action === 'update';
  ui.load.textContent = next.action === 'update' ? 'New listing instead' : 'Load to update';
  renderSignButton();
}

function fill(m: PublicMerchant): void {
  ui.slug.value = m.slug;
  ui.name.value = m.name;
  ui.description.value = m.description;
  renderNetworks(m.networks);
  routeCount = 0;
  replaceChildren(ui.routes, ...m.routes.map((r) => routeRow(r)));
  ui.baseUrl.value = '';
  replaceChildren(ui.headers);
  const kind = ui.form.querySelector<HTMLInputElement>(`input[name="upstream-kind"][value="${m.upstream.kind}"]`);
  if (kind) {
    kind.checked = true;
    showUpstreamKind();
  }
}

async function loadMerchant(slug: string): Promise<void> {
  clearMessage(ui.message);
  if (!SLUG.test(slug)) throw new ApiError(400, 'Type the slug of your listing first (3 to 40 lower-case letters, digits or hyphens).');
  const found = await api<{ merchant: PublicMerchant }>(`/api/merchants/${encodeURIComponent(slug)}`, { expect: [404] });
  if (found.status === 404) {
    setMode({ action: 'register' });
    showMessage(ui.message, 'info', `No merchant "${slug}" is listed yet: fill in the form to register it.`);
    return;
  }
  const m = found.body.merchant;
  if (wallet.address && !sameAddress(m.owner, wallet.address)) {
    throw new ApiError(403, `"${slug}" belongs to another wallet (${m.owner}); only that wallet can update it. Choose another slug to register your own.`);
  }
  fill(m);
  setMode({ action: 'update', slug });
  showMessage(ui.message, 'info', `Loaded "${slug}". Give the upstream again (it is never shown back), change what you like, then sign.`);
}

async function loadMine(): Promise<void> {
  if (!wallet.address) {
    replaceChildren(ui.mine);
    return;
  }
  const { body } = await api<{ merchants: PublicMerchant[] }>('/api/merchants');
  const mine = body.merchants.filter((m) => sameAddress(m.owner, wallet.address));
  replaceChildren(
    ui.mine,
    mine.length
      ? el(
          'div',
          { class: 'card' },
          el('h2', { text: 'Your listings' }),
          el(
            'ul',
            { class: 'mine-list' },
            ...mine.map((m) =>
              el(
                'li',
                {},
                el('strong', { text: m.name }),
                ' ',
                el('code', { text: `/m/${m.slug}` }),
                ` · ${m.routes.length} route${m.routes.length === 1 ? '' : 's'} `,
                el('button', { class: 'small secondary', text: 'Edit', attrs: { type: 'button' }, on: { click: () => void guarded(undefined, ui.message, () => loadMerchant(m.slug)) } }),
              ),
            ),
          ),
        )
      : el('p', { class: 'hint', text: 'This wallet has no listing yet.' }),
  );
}

async function submit(): Promise<void> {
  clearMessage(ui.message);
  if (!wallet.address) {
    await wallet.connect();
    return;
  }
  const payTo = wallet.address;
  const slug = ui.slug.value.trim();
  if (!SLUG.test(slug)) throw new ApiError(400, 'The slug must be 3 to 40 lower-case letters, digits or hyphens, starting and ending with a letter or digit.');
  const name = ui.name.value.trim();
  if (!name) throw new ApiError(400, 'Give your listing a name.');
  const networks = [...ui.networks.querySelectorAll<HTMLInputElement>('input:checked')].map((b) => b.value);
  if (networks.length === 0) throw new ApiError(400, 'Choose at least one network to be paid on.');
  const routes = readRoutes();
  const { upstream, fileSha256 } = await readUpstream();
  const registration: Registration = {
    action: mode.action === 'update' ? 'update' : 'register',
    slug,
    name,
    description: ui.description.value.trim(),
    payTo,
    networks,
    upstream,
    routes,
    nonce: hex(crypto.getRandomValues(new Uint8Array(16))),
    issuedAt: Math.floor(Date.now() / 1000),
  };
  const typed = registrationTypedData(registration, fileSha256);
  showMessage(ui.message, 'progress', 'Sign the listing in your wallet. Signing costs nothing and sends no transaction.');
  const signature = await wallet.signTypedData(
    {
      types: {
        EIP712Domain: [
          { name: 'name', type: 'string' },
          { name: 'version', type: 'string' },
        ],
        ...REGISTRATION_TYPES,
      },
      domain: typed.domain,
      primaryType: typed.primaryType,
      message: typed.message,
    },
    'signing the listing',
  );
  showMessage(ui.message, 'progress', 'Sending the signed listing…');
  let answer: Awaited<ReturnType<typeof postJson<{ merchant: PublicMerchant }>>>;
  try {
    answer = await postJson<{ merchant: PublicMerchant }>('/api/merchants', { registration, signature }, { timeoutMs: 60_000 });
  } catch (err) {
    if (err instanceof ApiError && err.status > 0 && err.status < 500) throw new ApiError(err.status, `The gateway refused the listing: ${err.message}`);
    throw err;
  }
  const m = answer.body.merchant;
  setMode({ action: 'update', slug: m.slug });
  showMessage(
    ui.message,
    'success',
    `${answer.status === 201 ? 'Registered' : 'Updated'} "${m.name}": ${m.routes.length} paid route${m.routes.length === 1 ? '' : 's'} under `,
    el('code', { text: `/m/${m.slug}/` }),
    '. See its ',
    el('a', { text: 'discovery document', attrs: { href: `/m/${m.slug}/openapi.json` } }),
    ' or find it in the ',
    el('a', { text: 'marketplace', attrs: { href: '/marketplace' } }),
    '.',
  );
  void loadMine().catch(() => undefined);
}

function showUpstreamKind(): void {
  const kind = ui.form.querySelector<HTMLInputElement>('input[name="upstream-kind"]:checked')?.value;
  ui.urlBox.hidden = kind === 'file';
  ui.fileBox.hidden = kind !== 'file';
}

// ------------------------------------------------------------------ wiring

for (const radio of ui.form.querySelectorAll<HTMLInputElement>('input[name="upstream-kind"]')) radio.addEventListener('change', showUpstreamKind);
ui.addHeader.addEventListener('click', () => ui.headers.append(headerRow()));
ui.addRoute.addEventListener('click', () => ui.routes.append(routeRow()));
ui.load.addEventListener('click', () => {
  if (mode.action === 'update') {
    setMode({ action: 'register' });
    ui.slug.value = '';
    ui.slug.focus();
    return;
  }
  void guarded(ui.load, ui.message, () => loadMerchant(ui.slug.value.trim()));
});
ui.form.addEventListener('submit', (e) => {
  e.preventDefault();
  void guarded(ui.sign, ui.message, submit).then(renderSignButton);
});
mountWalletButton(wallet, () => {
  renderSignButton();
  void loadMine().catch((err: unknown) => showMessage(ui.message, 'error', messageOf(err)));
});
if (config.networks.length === 0) showMessage(ui.message, 'error', 'This gateway settles on no network, so no merchant can be paid here.');
renderNetworks();
ui.routes.append(routeRow());
renderSignButton();
