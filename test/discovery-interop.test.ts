/**
 * Discovery as outside tools read it, against the real service (facilitator and gateway in one process sharing
 * one registry, as `gate402 start` runs them, over real sockets): `mppx validate` finds no failure; the bazaar
 * client of `@x402/extensions` lists the gateway's paid resources through the facilitator and each one is called
 * as listed; every 402 declares the `bazaar` extension as the official facilitator helpers read it; `/llms.txt`
 * describes the marketplace within a bounded size.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { HTTPFacilitatorClient } from '@x402/core/http';
import { extractDiscoveryInfo, validateDiscoveryExtension, validateDiscoveryExtensionSpec, withBazaar, type DiscoveryExtension } from '@x402/extensions/bazaar';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { generatePrivateKey } from 'viem/accounts';
import { CAIP2 } from '../src/chain/canonical.ts';
import { networksFromManifest } from '../src/devnet/manifest.ts';
import { startService } from '../src/cli/service.ts';
import { builtinCatalog } from '../src/devnet/catalog/catalog.ts';
import { LLMS_TXT_MAX_MERCHANTS, llmsTxt } from '../src/gateway/discovery/llms-txt.ts';
import { decodePaymentRequiredHeader } from '../src/protocol/x402/headers.ts';
import { freePort, testDevnet } from './helpers/devnet.ts';
import { registerOwnMerchant } from './helpers/paid-gateway.ts';
import { tempDir } from './helpers/temp-dir.ts';

const MPPX = fileURLToPath(new URL('../node_modules/.bin/mppx', import.meta.url));
const manifest = testDevnet();
const networks = networksFromManifest(manifest);
const [facilitatorPort, gatewayPort] = [await freePort(), await freePort()];
process.env.GATE402_LOG_LEVEL ??= 'warn';
const service = await startService(
  { networks, manifest, facilitator: true, gateway: true },
  {
    GATE402_DATA_DIR: tempDir('discovery'),
    GATE402_RELAYER_KEYS: [generatePrivateKey(), generatePrivateKey()].join(','),
    GATE402_FACILITATOR_PORT: String(facilitatorPort),
    GATE402_GATEWAY_PORT: String(gatewayPort),
    GATE402_STOCK_ENABLED: 'false',
    GATE402_WEB_ENABLED: 'false',
    GATE402_DISCOVERY_CACHE_MS: '300',
    GATE402_UPSTREAM_ALLOWLIST: '127.0.0.1',
  },
);
t.teardown(() => service.close());
const gw = service.gatewayUrl as string;
const fac = service.facilitatorUrl as string;
const bazaar = withBazaar(new HTTPFacilitatorClient({ url: fac }));

interface MppxResult {
  summary: { passed: number; failed: number; warnings: number };
  discovery: { checks: Array<{ label: string; severity: string; detail?: string }> };
  endpoints: Array<{ method: string; path: string; challenge: Array<{ label: string; severity: string; detail?: string }> }>;
}

/** `mppx validate` as a user runs it, with JSON output; its exit code says whether anything failed. */
async function mppxValidate(...args: string[]): Promise<{ code: number; result: MppxResult }> {
  const run = promisify(execFile);
  const env = { ...process.env, HOME: tempDir('mppx-home'), NO_COLOR: '1' };
  const out = await run(MPPX, ['validate', gw, '-j', ...args], { env, timeout: 120_000, maxBuffer: 32 * 1024 * 1024 }).then(
    (r) => ({ code: 0, stdout: r.stdout }),
    (e: { code?: number; stdout?: string }) => ({ code: e.code ?? -1, stdout: e.stdout ?? '' }),
  );
  return { code: out.code, result: JSON.parse(out.stdout) as MppxResult };
}

const failures = (r: MppxResult) =>
  [...r.discovery.checks, ...r.endpoints.flatMap((e) => e.challenge.map((c) => ({ ...c, label: `${e.method} ${e.path}: ${c.label}` })))].filter((c) => c.severity === 'fail');

t.test('mppx validate: one endpoint, then every paid endpoint of the discovery document, without a failure', async (t) => {
  const one = await mppxValidate('-e', 'GET:/m/catjoke/joke');
  t.same(failures(one.result), [], 'no failure');
  t.equal(one.code, 0, 'exit code 0');
  const passed = new Set([...one.result.discovery.checks, ...(one.result.endpoints[0]?.challenge ?? [])].filter((c) => c.severity === 'pass').map((c) => c.label));
  for (const label of ['llms.txt found and nonempty', 'Valid OpenAPI structure', 'Returns 402 without credentials', 'Challenge parseable', 'Realm matches server hostname', 'x402 payment challenge']) {
    t.ok(passed.has(label), `passes: ${label}`);
  }
  t.equal(one.result.discovery.checks.filter((c) => c.severity === 'warn').length, 0, 'no warning about the discovery document');

  const all = await mppxValidate();
  t.same(failures(all.result), [], 'no failure on any endpoint');
  t.equal(all.code, 0);
  const doc = (await (await fetch(`${gw}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
  const operations = Object.values(doc.paths).reduce((n, item) => n + Object.keys(item).length, 0);
  t.equal(all.result.endpoints.length, operations, `every paid operation was tried (${operations})`);
  t.ok(
    all.result.endpoints.every((e) => e.challenge.some((c) => c.label === 'Realm matches server hostname' && c.severity === 'pass')),
    'every challenge names the host buyers reach',
  );
});

t.test('every 402 declares the bazaar extension the way the official facilitator helpers read it', async (t) => {
  for (const [method, path, body] of [
    ['GET', '/m/weather/forecast', undefined],
    ['GET', '/m/catjoke/joke', undefined],
    ['POST', '/m/llm-chat/chat', '{"model":"llm-fast","messages":[{"role":"user","content":"hi"}]}'],
  ] as const) {
    const res = await fetch(`${gw}${path}`, { method, ...(body ? { body, headers: { 'content-type': 'application/json' } } : {}) });
    t.equal(res.status, 402);
    const required = decodePaymentRequiredHeader(res.headers.get('payment-required') as string);
    if (!t.ok(required.ok, `${path}: PAYMENT-REQUIRED decodes`) || !required.ok) continue;
    const extension = required.value.extensions?.bazaar as DiscoveryExtension;
    t.same(validateDiscoveryExtension(extension), { valid: true }, `${method} ${path}: info satisfies its schema`);
    t.same(validateDiscoveryExtensionSpec(extension as unknown as Record<string, unknown>), { valid: true }, `${method} ${path}: as the bazaar spec reads it`);
    // A facilitator catalogs a resource from the payload a client sends back: the 402's extensions, echoed.
    const accepted = required.value.accepts[0] as unknown as PaymentRequirements;
    const payload = { x402Version: 2, resource: required.value.resource, accepted, payload: {}, extensions: required.value.extensions } as unknown as PaymentPayload;
    const found = extractDiscoveryInfo(payload, accepted);
    t.match(found, { resourceUrl: `${gw}${path}`, x402Version: 2, discoveryInfo: { input: { type: 'http', method } } }, `${method} ${path}: cataloged`);
    t.match(found?.discoveryInfo.output, { type: 'json' }, 'with its output described');
  }
  const forecast = decodePaymentRequiredHeader((await fetch(`${gw}/m/weather/forecast`)).headers.get('payment-required') as string);
  t.match(forecast.ok && forecast.value.extensions?.bazaar, { info: { input: { queryParams: { latitude: 52.52, longitude: 13.41 } } } }, 'required query parameters come with examples');
});

t.test("the official bazaar client lists the gateway's paid resources through the facilitator; each one is called as listed", async (t) => {
  const supported = await new HTTPFacilitatorClient({ url: fac }).getSupported();
  t.ok(supported.extensions.includes('bazaar'), '/supported names the bazaar extension');

  const catalog = builtinCatalog({
    payTo: () => '0x0000000000000000000000000000000000000001',
    networks: [CAIP2.stockChain],
    upstreamFor: () => ({ kind: 'url', baseUrl: 'http://x.invalid', secretHeaders: {} }),
    owner: '0x0000000000000000000000000000000000000001',
    now: 0,
  });
  const operations = catalog.reduce((n, m) => n + m.routes.reduce((k, r) => k + r.methods.length, 0), 0);
  const first = await bazaar.extensions.bazaar.listResources({ type: 'http', limit: 10 });
  t.same(first.pagination, { limit: 10, offset: 0, total: operations }, `one item per route and method (${operations})`);
  t.equal(first.items.length, 10);
  const everything = [];
  for (let offset = 0; offset < first.pagination.total; offset += 100) everything.push(...(await bazaar.extensions.bazaar.listResources({ limit: 100, offset })).items);
  t.equal(new Set(everything.map((i) => `${inputOf(i).method} ${i.resource}`)).size, operations, 'no item twice');
  t.same((await bazaar.extensions.bazaar.listResources({ offset: operations })).items, [], 'past the end: nothing');

  const joke = everything.find((i) => i.resource === `${gw}/m/catjoke/joke`);
  if (!t.ok(joke, 'the cat joke is listed') || !joke) return;
  const payTo = joke.accepts[0]?.payTo as string;
  const byPayee = await bazaar.extensions.bazaar.listResources({ payTo: payTo.toLowerCase(), limit: 100 });
  t.ok(byPayee.items.length > 0 && byPayee.items.every((i) => i.accepts.some((a) => a.payTo === payTo)), 'payTo filters (any case)');
  t.ok(byPayee.pagination.total < operations);
  const base = await bazaar.extensions.bazaar.listResources({ network: CAIP2.base, scheme: 'exact', limit: 100 });
  t.equal(base.pagination.total, operations, 'every resource is offered on eip155:8453 too');
  t.same((await bazaar.extensions.bazaar.listResources({ network: 'eip155:1' })).pagination.total, 0, 'a network not served: none');
  t.same((await bazaar.extensions.bazaar.listResources({ scheme: 'upto' })).pagination.total, 0);
  t.same((await bazaar.extensions.bazaar.listResources({ type: 'mcp' })).pagination.total, 0);
  t.equal((await bazaar.extensions.bazaar.listResources({ extensions: 'bazaar' })).pagination.total, operations);

  // A client calls the listed resource as its bazaar info says and is offered exactly the listed terms.
  for (const item of everything.filter((i) => /catjoke|weather\/forecast|chain-stocks\/quote/.test(i.resource))) {
    const input = inputOf(item);
    const url = new URL(item.resource);
    for (const [k, v] of Object.entries(input.queryParams ?? {})) url.searchParams.set(k, String(v));
    const res = await fetch(url, { method: input.method, ...(input.method === 'POST' ? { body: JSON.stringify(input.body), headers: { 'content-type': 'application/json' } } : {}) });
    t.equal(res.status, 402, `${input.method} ${url.pathname}: 402`);
    const required = decodePaymentRequiredHeader(res.headers.get('payment-required') as string);
    t.same(required.ok && required.value.accepts, item.accepts, `${input.method} ${url.pathname}: the listed offers are the 402's`);
    t.same(required.ok && required.value.extensions, item.extensions, 'and so are its extensions');
  }
});

t.test('a merchant registered at the gateway is listed by the facilitator within the cache period', async (t) => {
  const { slug, payTo } = await registerOwnMerchant(gw, 'http://127.0.0.1:9', { slug: `listed-${Date.now().toString(36)}`, priceUsd: '0.020000', networks: [CAIP2.base] });
  let found: Awaited<ReturnType<typeof bazaar.extensions.bazaar.listResources>> | undefined;
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    found = await bazaar.extensions.bazaar.listResources({ payTo, limit: 100 });
    if (found.pagination.total > 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.same(found?.items.map((i) => [i.resource, i.accepts.map((a) => [a.network, a.amount])]).sort(), [
    [`${gw}/m/${slug}/data`, [[CAIP2.base, '20000']]],
    [`${gw}/m/${slug}/data`, [[CAIP2.base, '20000']]],
  ]);
  t.match(await (await fetch(`${gw}/llms.txt`)).text(), `${gw}/m/${slug}/data`, 'llms.txt names it too');
});

t.test('bad listing parameters: a 400 with what is wrong, never a 5xx', async (t) => {
  for (const query of [
    'limit=0',
    'limit=101',
    'limit=abc',
    'limit=1e3',
    'offset=-1',
    'offset=1.5',
    'payTo=nobody',
    'limit=5&limit=6',
    `type=${'x'.repeat(200)}`,
    `network=${encodeURIComponent('a b')}`,
  ]) {
    const res = await fetch(`${fac}/discovery/resources?${query}`);
    const body = (await res.json()) as { error?: string };
    t.equal(res.status, 400, `${query.slice(0, 40)}: 400`);
    t.ok(typeof body.error === 'string' && body.error.length > 0, `${query.slice(0, 40)}: ${body.error}`);
  }
  await t.rejects(bazaar.extensions.bazaar.listResources({ limit: 1000 }), /400/, 'the official client sees the refusal');
});

t.test('/llms.txt: the marketplace for agents, bounded whatever the registry holds', async (t) => {
  const res = await fetch(`${gw}/llms.txt`);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/plain/);
  const text = await res.text();
  t.match(text, /^# gate402 marketplace\n\n> /);
  for (const m of catalogSlugs()) t.ok(text.includes(`(\`${m}\`)`), `names ${m}`);
  for (const words of [
    'PAYMENT-REQUIRED',
    'PAYMENT-SIGNATURE',
    'Authorization: Payment',
    'realm="127.0.0.1"',
    'Permit2',
    'EIP-3009',
    `${gw}/m/catjoke/joke`,
    '0.010000 USD',
    `${gw}/openapi.json`,
    '/discovery/resources',
  ]) {
    t.ok(text.includes(words), `mentions ${words}`);
  }
  // Ten thousand merchants of a hundred routes each: the document stays small and says where the rest are.
  const one = builtinCatalog({
    payTo: () => '0x0000000000000000000000000000000000000001',
    networks: [CAIP2.base],
    upstreamFor: () => ({ kind: 'url', baseUrl: 'http://x.invalid', secretHeaders: {} }),
    owner: '0x0000000000000000000000000000000000000001',
    now: 0,
  })[0]!;
  const routes = Array.from({ length: 100 }, (_, j) => ({ ...one.routes[0]!, route: `r${j}` }));
  const many = Array.from({ length: 10_000 }, (_, i) => ({ ...one, slug: `m${i}`, description: 'd'.repeat(5000), routes }));
  const big = llmsTxt(many, { baseUrl: 'https://pay.example', networks, realm: 'pay.example' });
  t.ok(big.length < 1_000_000, `under 1 MB (${big.length} characters)`);
  t.ok(big.includes(`… and ${10_000 - LLMS_TXT_MAX_MERCHANTS} more merchants`));
});

/** How a listed item says it is called: its bazaar declaration's `info.input`. */
function inputOf(item: { extensions?: Record<string, unknown> }): { method: string; queryParams?: Record<string, unknown>; body?: unknown } {
  const declared = item.extensions?.bazaar as { info: { input: { method: string; queryParams?: Record<string, unknown>; body?: unknown } } } | undefined;
  if (!declared) throw new Error('a listed item without its bazaar declaration');
  return declared.info.input;
}

function catalogSlugs(): string[] {
  return builtinCatalog({
    payTo: () => '0x0000000000000000000000000000000000000001',
    networks: [CAIP2.base],
    upstreamFor: () => ({ kind: 'url', baseUrl: 'http://x.invalid', secretHeaders: {} }),
    owner: '0x0000000000000000000000000000000000000001',
    now: 0,
  }).map((m) => m.slug);
}
