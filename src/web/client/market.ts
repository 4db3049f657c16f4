/**
 * The marketplace page: every merchant and route of the discovery index (`GET /openapi.json`), with its price, its
 * inputs and a paid-request example to copy. Merchant details come from `GET /api/merchants`.
 */
import { api } from './api.ts';
import { mountChannelPanel } from './channel-panel.ts';
import { messageOf, mountWalletButton, reportUncaughtErrors, showMessage } from './chrome.ts';
import { byId, el, replaceChildren } from './dom.ts';
import { money } from './format.ts';
import { shortAddress, Wallet } from './wallet.ts';

reportUncaughtErrors();

type Json = Record<string, unknown>;

interface Parameter {
  name: string;
  in: 'query' | 'path';
  required?: boolean;
  description?: string;
  schema?: Json;
  example?: unknown;
}

interface Operation {
  operationId: string;
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: Parameter[];
  requestBody?: { required?: boolean; description?: string; content?: Record<string, { schema?: Json }> };
  'x-gate402-route'?: string;
  'x-payment-info'?: { price?: { amount?: string }; network?: string };
  /** One offer per network the route is paid on (beside `x-payment-info`, whose flat fields name one). */
  'x-payment-offers'?: Array<{ network: string; amount: string }>;
}

interface OpenApi {
  servers?: Array<{ url: string }>;
  tags?: Array<{ name: string; description?: string }>;
  paths: Record<string, Partial<Record<'get' | 'post', Operation>>>;
}

interface PublicMerchant {
  slug: string;
  name: string;
  description: string;
  payTo: string;
  networks: string[];
  upstream: { kind: 'url' | 'file'; contentType?: string; size?: number };
}

interface Variant {
  method: 'GET' | 'POST';
  path: string;
  op: Operation;
}

interface RouteGroup {
  id: string;
  variants: Variant[];
}

const NETWORK_WORDS: Record<string, string> = { 'eip155:8453': 'primary network', 'eip155:84532': 'primary network testnet', 'eip155:4663': 'stock chain' };
const networkName = (caip2: string) => NETWORK_WORDS[caip2] ?? caip2;

const ui = { merchants: byId('merchants'), filter: byId<HTMLInputElement>('filter'), count: byId('market-count'), message: byId('market-message') };

/** `'text'` for a POSIX shell. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

function exampleText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** A small value that fits `schema`: its example, first enum value, or a placeholder of its type. */
export function exampleFor(schema: Json | undefined, depth = 0): unknown {
  if (!schema || depth > 6) return 'value';
  const examples = schema.examples;
  if (Array.isArray(examples) && examples.length) return examples[0];
  if ('example' in schema) return schema.example;
  const en = schema.enum;
  if (Array.isArray(en) && en.length) return en.includes('user') ? 'user' : en[0];
  const anyOf = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(anyOf) && anyOf.length) return exampleFor(anyOf[0] as Json, depth + 1);
  switch (schema.type) {
    case 'object': {
      const props = (schema.properties ?? {}) as Record<string, Json>;
      const required = (schema.required ?? []) as string[];
      return Object.fromEntries(required.map((k) => [k, exampleFor(props[k], depth + 1)]));
    }
    case 'array':
      return [exampleFor(schema.items as Json | undefined, depth + 1)];
    case 'integer':
    case 'number':
      return typeof schema.minimum === 'number' ? schema.minimum : 1;
    case 'boolean':
      return true;
    case 'string':
      return 'text';
    default:
      return 'Hello';
  }
}

/** The URL of a call to `v` with example values (or `{name}` where the document gives none). */
function exampleUrl(base: string, v: Variant): string {
  let path = v.path;
  const query: string[] = [];
  for (const p of v.op.parameters ?? []) {
    if (p.in === 'path') path = path.replace(`{${p.name}}`, encodeURIComponent(p.example === undefined ? p.name : exampleText(p.example)));
    else if (p.schema?.type !== 'object' && (p.required || p.example !== undefined))
      query.push(`${encodeURIComponent(p.name)}=${encodeURIComponent(p.example === undefined ? '' : exampleText(p.example))}`);
  }
  return `${base}${path}${query.length ? `?${query.join('&')}` : ''}`;
}

function payCommand(base: string, v: Variant): string {
  const url = shellQuote(exampleUrl(base, v));
  if (v.method === 'GET') return `npx gate402 pay ${url}`;
  const schema = v.op.requestBody?.content?.['application/json']?.schema;
  return `npx gate402 pay --method POST --data ${shellQuote(JSON.stringify(exampleFor(schema) ?? {}))} ${url}`;
}

async function copy(text: string, button: HTMLButtonElement, code: HTMLElement): Promise<void> {
  const done = (label: string) => {
    button.textContent = label;
    setTimeout(() => (button.textContent = 'Copy'), 2000);
  };
  try {
    await navigator.clipboard.writeText(text);
    done('Copied');
  } catch {
    // No clipboard access (an insecure origin, or refused): select the text so the person can copy it.
    const range = document.createRange();
    range.selectNodeContents(code);
    getSelection()?.removeAllRanges();
    getSelection()?.addRange(range);
    done(document.execCommand('copy') ? 'Copied' : 'Selected: press Ctrl+C');
  }
}

function codeBlock(label: string, text: string): HTMLElement {
  const code = el('code', { text });
  const button = el('button', { class: 'small secondary copy', text: 'Copy', attrs: { type: 'button', 'aria-label': `Copy: ${label}` } });
  button.addEventListener('click', () => void copy(text, button, code));
  return el('div', { class: 'example' }, el('span', { class: 'example-label', text: label }), el('pre', {}, code), button);
}

function schemaSummary(schema: Json | undefined): string {
  if (!schema) return 'any JSON';
  if (schema.type === 'object') {
    const props = Object.keys((schema.properties ?? {}) as Json);
    const required = new Set((schema.required ?? []) as string[]);
    if (props.length === 0) return schema.additionalProperties === false ? 'an empty object' : 'a JSON object';
    return `a JSON object: ${props.map((p) => (required.has(p) ? `${p} (required)` : p)).join(', ')}`;
  }
  return typeof schema.type === 'string' ? schema.type : 'JSON';
}

/** Text with `backticked` spans shown as code. */
function withCode(text: string): Array<Node | string> {
  return text.split(/`([^`]+)`/).map((part, i) => (i % 2 === 1 ? el('code', { text: part }) : part));
}

function inputsOf(v: Variant): HTMLElement {
  const params = (v.op.parameters ?? []).filter((p) => p.schema?.type !== 'object');
  const freeForm = (v.op.parameters ?? []).some((p) => p.schema?.type === 'object');
  const body = v.op.requestBody;
  return el(
    'div',
    { class: 'inputs' },
    params.length
      ? el(
          'ul',
          { class: 'params' },
          ...params.map((p) =>
            el(
              'li',
              {},
              el('code', { class: 'param', text: p.name }),
              el('span', { class: 'hint', text: ` ${p.in === 'path' ? 'in the path' : 'query'}${p.required ? ', required' : ''}` }),
              p.description ? el('span', { class: 'param-text' }, ...withCode(p.description)) : null,
              p.example === undefined ? null : el('span', { class: 'param-example' }, 'Example: ', el('code', { text: exampleText(p.example) })),
            ),
          ),
        )
      : el('p', { class: 'hint', text: v.method === 'GET' && !freeForm && !body ? 'No inputs.' : '' }),
    freeForm ? el('p', { class: 'hint', text: 'Any other query keys are forwarded to the merchant as they are.' }) : null,
    body
      ? el(
          'p',
          { class: 'hint' },
          `${v.method} body${body.required ? ' (required)' : ''}: `,
          ...withCode(`${body.description ? `${body.description} ` : ''}${schemaSummary(body.content?.['application/json']?.schema)}.`),
        )
      : null,
  );
}

function routeCard(base: string, group: RouteGroup): HTMLElement {
  const main = group.variants.reduce((a, b) => (b.path.length < a.path.length ? b : a));
  const info = main.op['x-payment-info'];
  const methods = [...new Set(group.variants.map((v) => v.method))];
  const shapes = [...new Set(group.variants.map((v) => v.path))];
  const networks = [...new Set((main.op['x-payment-offers'] ?? []).map((o) => networkName(o.network)))];
  const details = el('details', { class: 'route-details' }, el('summary', { text: 'Inputs and a paid-request example' }));
  let filled = false;
  details.addEventListener('toggle', () => {
    if (filled || !details.open) return;
    filled = true;
    const seen = new Set<string>();
    for (const v of group.variants) {
      const key = `${v.method} ${v.path}`;
      if (seen.has(key)) continue;
      seen.add(key);
      details.append(
        el('h4', {}, el('span', { class: `method ${v.method.toLowerCase()}`, text: v.method }), ' ', el('code', { text: v.path })),
        inputsOf(v),
        codeBlock('Pay and call it (x402, as a devnet buyer or GATE402_BUYER_KEY)', payCommand(base, v)),
        codeBlock('See its 402 challenge', `curl -i${v.method === 'POST' ? ' -X POST' : ''} ${shellQuote(exampleUrl(base, v))}`),
      );
    }
  });
  const text = [group.id, main.path, main.op.summary ?? '', main.op.description ?? ''].join(' ').toLowerCase();
  return el(
    'article',
    { class: 'route', attrs: { 'data-route': group.id, 'data-search': text } },
    el(
      'div',
      { class: 'route-head' },
      el('h3', {}, ...methods.map((m) => el('span', { class: `method ${m.toLowerCase()}`, text: m })), ' ', el('code', { class: 'path', text: main.path })),
      el('span', { class: 'price', text: info?.price?.amount ? `$${money(info.price.amount)}` : 'price unknown', title: info?.price?.amount ? `${info.price.amount} USD per call` : '' }),
    ),
    el('p', { class: 'route-summary', text: main.op.summary ?? '' }),
    el('p', { class: 'route-description' }, ...withCode((main.op.description ?? '').replace(/\s*Price: [\d.]+ USD per call\.$/, ''))),
    el('p', { class: 'hint' }, `Per call; paid on ${networks.join(', ') || 'the stock chain'}.`, shapes.length > 1 ? ` Also: ${shapes.filter((s) => s !== main.path).join(', ')}.` : ''),
    details,
  );
}

function merchantCard(base: string, slug: string, tagText: string | undefined, m: PublicMerchant | undefined, groups: RouteGroup[]): HTMLElement {
  const name = m?.name ?? tagText?.split(': ')[0] ?? slug;
  const description = m?.description ?? tagText?.split(': ').slice(1).join(': ') ?? '';
  return el(
    'section',
    { class: 'card merchant', attrs: { 'data-merchant': slug, 'aria-labelledby': `m-${slug}` } },
    el(
      'div',
      { class: 'card-head' },
      el('h2', { attrs: { id: `m-${slug}` } }, name, ' ', el('span', { class: 'slug', text: `/m/${slug}` })),
      el('a', { text: 'openapi.json', attrs: { href: `/m/${slug}/openapi.json` } }),
    ),
    el('p', { text: description }),
    m
      ? el(
          'p',
          { class: 'hint' },
          'Paid to ',
          el('code', { text: shortAddress(m.payTo), title: m.payTo }),
          ` · ${m.networks.map(networkName).join(', ')}${m.upstream.kind === 'file' ? ` · a file (${m.upstream.contentType ?? ''})` : ''}`,
        )
      : null,
    el('div', { class: 'routes' }, ...groups.map((g) => routeCard(base, g))),
  );
}

function applyFilter(): void {
  const words = ui.filter.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  let routes = 0;
  let merchants = 0;
  for (const card of ui.merchants.querySelectorAll<HTMLElement>('.merchant')) {
    const merchantText = `${card.dataset.merchant ?? ''} ${card.querySelector('h2')?.textContent ?? ''} ${card.querySelector(':scope > p')?.textContent ?? ''}`.toLowerCase();
    let visible = 0;
    for (const route of card.querySelectorAll<HTMLElement>('.route')) {
      const text = `${merchantText} ${route.dataset.search ?? ''}`;
      const show = words.every((w) => text.includes(w));
      route.hidden = !show;
      if (show) visible++;
    }
    card.hidden = visible === 0;
    routes += visible;
    if (visible) merchants++;
  }
  ui.count.textContent = `${routes} route${routes === 1 ? '' : 's'} from ${merchants} merchant${merchants === 1 ? '' : 's'}`;
}

async function load(): Promise<void> {
  const [doc, list] = await Promise.all([api<OpenApi>('/openapi.json'), api<{ merchants: PublicMerchant[] }>('/api/merchants').catch(() => undefined)]);
  const base = (doc.body.servers?.[0]?.url ?? location.origin).replace(/\/$/, '');
  const bySlug = new Map((list?.body.merchants ?? []).map((m) => [m.slug, m]));
  const order = (doc.body.tags ?? []).map((t) => t.name);
  const groups = new Map<string, Map<string, RouteGroup>>();
  for (const [path, item] of Object.entries(doc.body.paths)) {
    for (const method of ['get', 'post'] as const) {
      const op = item[method];
      if (!op) continue;
      const slug = op.tags?.[0] ?? path.split('/')[2] ?? '?';
      if (!order.includes(slug)) order.push(slug);
      const id = op['x-gate402-route'] ?? op.operationId;
      const routes = groups.get(slug) ?? new Map<string, RouteGroup>();
      groups.set(slug, routes);
      const group = routes.get(id) ?? { id, variants: [] };
      routes.set(id, group);
      group.variants.push({ method: method === 'get' ? 'GET' : 'POST', path, op });
    }
  }
  const tags = new Map((doc.body.tags ?? []).map((t) => [t.name, t.description]));
  const cards = order.filter((slug) => groups.has(slug)).map((slug) => merchantCard(base, slug, tags.get(slug), bySlug.get(slug), [...(groups.get(slug)?.values() ?? [])]));
  replaceChildren(ui.merchants, ...(cards.length ? cards : [el('p', { class: 'hint', text: 'No merchant is listed on this gateway yet.' })]));
  applyFilter();
}

ui.filter.addEventListener('input', applyFilter);
mountWalletButton(new Wallet(), () => {});
mountChannelPanel();
load().catch((err: unknown) => {
  replaceChildren(ui.merchants);
  showMessage(ui.message, 'error', `The discovery index could not be loaded. ${messageOf(err)}`);
});
