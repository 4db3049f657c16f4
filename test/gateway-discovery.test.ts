/**
 * Discovery documents: they validate as OpenAPI 3.1 (with @apidevtools/swagger-parser, plus the checks it does
 * not make for 3.x: unique operation ids, declared path parameters, JSON Schema 2020-12 schemas), and their
 * operations and prices equal the shared route table (`../shared/reference/routes.json` from the repository
 * root when present, else the committed copy) exactly.
 */
import t, { type Test } from 'tap';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS } from '../src/chain/canonical.ts';
import { NetworkRegistry, type Network } from '../src/chain/networks.ts';
import { builtinCatalog, type CatalogRouteRecord } from '../src/devnet/catalog/catalog.ts';
import type { Merchant } from '../src/gateway/catalog/merchant.ts';
import { DiscoveryError, merchantOpenApi, rootOpenApi, type DiscoveryContext, type OpenApiDocument, type PaymentInfo } from '../src/gateway/discovery/openapi.ts';
import { wellKnownX402 } from '../src/gateway/discovery/well-known.ts';
import { validate as validateMppDiscovery } from 'mppx/discovery';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const SHARED = `${REPO}../shared/reference/routes.json`;
const reference: CatalogRouteRecord[] = existsSync(SHARED)
  ? (JSON.parse(readFileSync(SHARED, 'utf8')) as { routes: CatalogRouteRecord[] }).routes
  : (JSON.parse(readFileSync(`${REPO}src/devnet/catalog/routes.json`, 'utf8')) as CatalogRouteRecord[]);
if (!existsSync(SHARED)) t.comment(`${SHARED} not found: checking against the committed copy`);

const COIN_B = '0x000000000000000000000000000000000000B0b0';
const COIN_A = '0x000000000000000000000000000000000000a0A0';
const COIN_A_TEST = '0x000000000000000000000000000000000000a0a1';
const STOCK: Network = {
  caip2: 'eip155:4663',
  chainId: 4663,
  rpcUrl: 'http://127.0.0.1:1',
  stablecoin: { address: COIN_B, name: 'Stock Chain Dollar', version: '1', decimals: 6, symbol: 'SCUSD' },
  permit2: PERMIT2_ADDRESS,
  exactPermit2Proxy: EXACT_PERMIT2_PROXY_ADDRESS,
};
const BASE: Network = {
  caip2: 'eip155:8453',
  chainId: 8453,
  rpcUrl: 'http://127.0.0.1:2',
  stablecoin: { address: COIN_A, name: 'USD Coin', version: '2', decimals: 6, symbol: 'USDC' },
};
const BASE_TEST: Network = {
  caip2: 'eip155:84532',
  chainId: 84532,
  rpcUrl: 'http://127.0.0.1:3',
  stablecoin: { address: COIN_A_TEST, name: 'USDC', version: '2', decimals: 6, symbol: 'USDC' },
};
const networks = new NetworkRegistry([STOCK, BASE, BASE_TEST]);
const ctx: DiscoveryContext = { baseUrl: 'https://pay.example.test/', networks, contactEmail: 'ops@example.test', challengeInfo: { maxTimeoutSeconds: 300 } };
const BASE_URL = 'https://pay.example.test';

const payTo = (slug: string): `0x${string}` => `0x${Buffer.from(slug.padEnd(20, '.').slice(0, 20)).toString('hex')}`;
const merchants = builtinCatalog({
  payTo,
  networks: ['eip155:4663', 'eip155:8453', 'eip155:84532'],
  upstreamFor: (slug) => ({ kind: 'url', baseUrl: `http://hidden-origin.invalid/${slug}`, secretHeaders: { 'x-api-key': 'TOP-SECRET-VALUE' } }),
  owner: '0x00000000000000000000000000000000000000aa',
  now: 1_700_000_000_000,
});

type Op = { path: string; method: 'GET' | 'POST'; op: Record<string, unknown> & { operationId: string; 'x-payment-info': PaymentInfo; 'x-payment-offers': unknown[]; 'x-gate402-route': string } };

function operations(doc: OpenApiDocument): Op[] {
  const out: Op[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) out.push({ path, method: method.toUpperCase() as 'GET' | 'POST', op: op as Op['op'] });
  }
  return out;
}

/** swagger-parser's validation (it dereferences in place, so it gets a copy). */
async function validate(doc: OpenApiDocument): Promise<void> {
  await SwaggerParser.validate(structuredClone(doc) as never);
}

/** What swagger-parser does not check for OpenAPI 3.x. */
function semanticProblems(doc: OpenApiDocument): string[] {
  const problems: string[] = [];
  const ids = new Set<string>();
  const shapes = new Map<string, string>();
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  const schemas: unknown[] = [];
  const components = doc.components as { schemas: Record<string, unknown> };
  for (const s of Object.values(components.schemas)) schemas.push(s);
  for (const [path, item] of Object.entries(doc.paths)) {
    const shape = path.replace(/\{[^}]+\}/g, '{}');
    if (shapes.has(shape)) problems.push(`${path} is equivalent to ${shapes.get(shape)}`);
    shapes.set(shape, path);
    const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!).sort();
    for (const [method, raw] of Object.entries(item)) {
      const op = raw as {
        operationId: string;
        parameters?: { name: string; in: string; required?: boolean; schema: unknown }[];
        requestBody?: { content: Record<string, { schema: unknown }> };
        responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
      };
      if (ids.has(op.operationId)) problems.push(`duplicate operationId ${op.operationId}`);
      ids.add(op.operationId);
      const params = op.parameters ?? [];
      const pathParams = params.filter((p) => p.in === 'path');
      if (JSON.stringify(pathParams.map((p) => p.name).sort()) !== JSON.stringify(templated))
        problems.push(`${method} ${path}: path parameters ${pathParams.map((p) => p.name)} vs template ${templated}`);
      if (pathParams.some((p) => p.required !== true)) problems.push(`${method} ${path}: a path parameter is not required`);
      const seen = new Set<string>();
      for (const p of params) {
        if (seen.has(`${p.in}:${p.name}`)) problems.push(`${method} ${path}: duplicate parameter ${p.name}`);
        seen.add(`${p.in}:${p.name}`);
        schemas.push(p.schema);
      }
      for (const c of Object.values(op.requestBody?.content ?? {})) schemas.push(c.schema);
      for (const r of Object.values(op.responses)) for (const c of Object.values(r.content ?? {})) schemas.push(c.schema);
    }
  }
  for (const s of schemas) {
    if (typeof s === 'object' && s !== null && '$ref' in s) continue;
    try {
      ajv.compile(s as object);
    } catch (err) {
      problems.push(`schema ${JSON.stringify(s)}: ${(err as Error).message}`);
    }
  }
  return problems;
}

function expectedOperationId(r: CatalogRouteRecord, method: string): string {
  return method === 'POST' && r.methods.length > 1 ? `${r.operationId}-post` : r.operationId;
}

const PAYMENT_INFO_KEYS = ['price', 'protocols', 'amount', 'currency', 'network', 'recipient', 'scheme', 'intent', 'method', 'extra'];

/** Every operation of `doc` against the reference rows of `routes`. */
function checkAgainstReference(t: Test, doc: OpenApiDocument, routes: CatalogRouteRecord[]): void {
  const ops = operations(doc);
  const plain = ops.filter((o) => !o.path.includes('{'));
  t.same(plain.map((o) => `${o.method} ${o.path}`).sort(), routes.flatMap((r) => r.methods.map((m) => `${m} ${r.path}`)).sort(), 'exactly the listed paths and methods');
  for (const r of routes) {
    for (const method of r.methods) {
      const o = plain.find((x) => x.path === r.path && x.method === method)!;
      const info = o.op['x-payment-info'];
      t.equal(o.op.operationId, expectedOperationId(r, method), `${method} ${r.path} operationId`);
      t.equal(o.op['x-gate402-route'], r.operationId);
      t.same(Object.keys(info), PAYMENT_INFO_KEYS, `${method} ${r.path}: x-payment-info fields`);
      t.same(info.price, { mode: 'fixed', currency: 'USD', amount: r.priceUsd }, `${method} ${r.path} price`);
      t.equal(info.amount, r.amountAtomic, `${method} ${r.path} atomic amount`);
      t.same(info.protocols, [{ mpp: { method: 'evm', intent: 'charge', currency: COIN_B } }, { x402: {} }]);
      t.same([info.currency, info.network, info.recipient, info.scheme, info.intent, info.method], [COIN_B, 'eip155:4663', payTo(r.slug), 'exact', 'charge', 'evm']);
      t.same(info.extra, { assetTransferMethod: 'permit2', spender: EXACT_PERMIT2_PROXY_ADDRESS });
      t.same(o.op['x-payment-offers'], [
        {
          amount: r.amountAtomic,
          currency: COIN_B,
          network: 'eip155:4663',
          recipient: payTo(r.slug),
          scheme: 'exact',
          extra: { assetTransferMethod: 'permit2', spender: EXACT_PERMIT2_PROXY_ADDRESS },
        },
        { amount: r.amountAtomic, currency: COIN_A, network: 'eip155:8453', recipient: payTo(r.slug), scheme: 'exact', extra: { name: 'USD Coin', version: '2' } },
        { amount: r.amountAtomic, currency: COIN_A_TEST, network: 'eip155:84532', recipient: payTo(r.slug), scheme: 'exact', extra: { name: 'USDC', version: '2' } },
      ]);
      t.same(o.op.tags, [r.slug]);
      t.ok(typeof o.op.summary === 'string' && typeof o.op.description === 'string');
      const responses = o.op.responses as Record<string, unknown>;
      t.same(Object.keys(responses).sort(), ['200', '202', '402']);
      t.same(responses['402'], { $ref: '#/components/responses/PaymentRequired' });
      t.equal(o.op.requestBody !== undefined, method === 'POST', 'a request body exactly on POST');
    }
  }
  // Operations on appended-segment paths: same route, same price.
  for (const o of ops.filter((x) => x.path.includes('{'))) {
    const r = routes.find((x) => x.operationId === o.op['x-gate402-route']);
    if (!t.ok(r, `${o.path} belongs to a listed route`) || !r) continue;
    t.ok(o.path.startsWith(`${r.path}/`), `${o.path} extends ${r.path}`);
    t.ok(o.op.operationId.startsWith(`${r.operationId}-`));
    t.ok(r.methods.includes(o.method));
    const base = plain.find((x) => x.path === r.path && x.method === o.method)!;
    t.same(o.op['x-payment-info'], base.op['x-payment-info'], `${o.path}: priced like ${r.path}`);
    t.same(o.op['x-payment-offers'], base.op['x-payment-offers'], `${o.path}: offered like ${r.path}`);
  }
}

t.test('the root index: valid OpenAPI 3.1 with exactly the listed operations and prices', async (t) => {
  const doc = rootOpenApi(merchants, ctx);
  await validate(doc);
  t.same(semanticProblems(doc), []);
  t.equal(doc.openapi, '3.1.0');
  const info = doc.info as Record<string, unknown>;
  t.equal(info.version, '1.0.0');
  t.ok(typeof info.title === 'string' && (info.title as string).length > 0);
  t.same(info.contact, { email: 'ops@example.test' });
  t.same(doc.servers, [{ url: BASE_URL }]);
  t.same(
    (doc.tags as { name: string }[]).map((x) => x.name),
    merchants.map((m) => m.slug),
    'one tag per merchant',
  );
  checkAgainstReference(t, doc, reference);
  const appended = operations(doc).filter((o) => o.path.includes('{'));
  t.ok(appended.some((o) => o.path === '/m/wiki/summary/{title}'));
  t.ok(appended.some((o) => o.path === '/m/world-data/indicator/{iso}/indicator/{code}'));
  t.ok(appended.some((o) => o.path === '/m/crypto-prices/historical/{timestamp}/{coins}'));
  const tvl = operations(doc).find((o) => o.path === '/m/defi/tvl')!;
  t.same((tvl.op.responses as { '200': { content: unknown } })['200'].content, { 'application/json': { schema: { type: 'number' } } }, 'defi/tvl: a bare number');
  const quotePost = operations(doc).find((o) => o.path === '/m/chain-stocks/quote' && o.method === 'POST')!;
  t.match(quotePost.op.requestBody, { required: false, content: { 'application/json': { schema: { additionalProperties: false, required: ['symbol'] } } } });
  const chatOp = operations(doc).find((o) => o.path === '/m/llm-chat/chat')!;
  t.equal(chatOp.op.operationId, 'llm-chat-chat', 'a POST-only route keeps the plain id');
});

t.test("mppx's discovery validator finds nothing wrong in any document; it would refuse offers mixed with the flat fields", async (t) => {
  const docs = [rootOpenApi(merchants, ctx), ...merchants.map((m) => merchantOpenApi(m, ctx))];
  for (const doc of docs) t.same(validateMppDiscovery(doc), [], `${(doc.info as { title: string }).title}: no error, no warning`);
  const root = docs[0]!;
  t.same(root['x-service-info'], { categories: ['marketplace'], docs: { llms: `${BASE_URL}/llms.txt`, apiReference: `${BASE_URL}/openapi.json` } });
  const mixed = structuredClone(root);
  const op = mixed.paths['/m/catjoke/joke']!.get as Record<string, Record<string, unknown>>;
  op['x-payment-info']!.offers = op['x-payment-offers'];
  t.match(validateMppDiscovery(mixed), [{ message: 'Cannot mix offers with flat payment info fields', severity: 'error' }], 'the validator is live');
});

t.test('the validator is real: broken documents are refused', async (t) => {
  const doc = rootOpenApi(merchants, ctx);
  const noVersion = structuredClone(doc);
  delete (noVersion.info as Record<string, unknown>).version;
  await t.rejects(validate(noVersion), 'info.version is required');
  const badResponses = structuredClone(doc);
  (badResponses.paths['/m/wiki/summary']!.get as Record<string, unknown>).responses = 5;
  await t.rejects(validate(badResponses), 'responses must be an object');
  const badParam = structuredClone(doc);
  ((badParam.paths['/m/wiki/search']!.get as Record<string, unknown>).parameters as Record<string, unknown>[])[0]!.in = 'body';
  await t.rejects(validate(badParam), 'no "in: body" in OpenAPI 3');
  const duplicate = structuredClone(doc);
  (duplicate.paths['/m/wiki/search']!.get as Record<string, unknown>).operationId = 'wiki-summary';
  t.match(semanticProblems(duplicate), ['duplicate operationId wiki-summary']);
});

t.test('x-guidance explains the flows', async (t) => {
  const guidance = (rootOpenApi(merchants, ctx).info as Record<string, string>)['x-guidance']!;
  for (const word of [
    '402',
    'PAYMENT-REQUIRED',
    'WWW-Authenticate: Payment',
    'PAYMENT-SIGNATURE',
    'Authorization: Payment',
    'PAYMENT-RESPONSE',
    'Payment-Receipt',
    '202',
    'x402 version 2',
    '"exact"',
    'Permit2',
    EXACT_PERMIT2_PROXY_ADDRESS,
    'EIP-3009',
    'eip155:4663',
    'eip155:8453',
    'eip155:84532',
    'method "evm"',
    'intent "charge"',
    '300 seconds',
    `${BASE_URL}/api/gas/sponsor`,
    `${BASE_URL}/.well-known/x402`,
  ]) {
    t.ok(guidance.includes(word), `mentions ${word}`);
  }
});

t.test('per-merchant documents: valid, and together the same operations as the index', async (t) => {
  const root = rootOpenApi(merchants, ctx);
  const union: Op[] = [];
  for (const m of merchants) {
    const doc = merchantOpenApi(m, ctx);
    await validate(doc);
    t.same(semanticProblems(doc), [], m.slug);
    t.equal((doc.info as Record<string, unknown>).version, '1.0.0');
    t.equal((doc.info as Record<string, unknown>).title, m.name);
    t.same((doc.info as Record<string, unknown>).contact, { email: 'ops@example.test' });
    t.ok(typeof (doc.info as Record<string, unknown>)['x-guidance'] === 'string');
    t.same(doc.servers, [{ url: BASE_URL }]);
    t.same(
      (doc.tags as { name: string }[]).map((x) => x.name),
      [m.slug],
    );
    checkAgainstReference(
      t,
      doc,
      reference.filter((r) => r.slug === m.slug),
    );
    union.push(...operations(doc));
  }
  t.same(union, operations(root));
});

t.test('documents never reveal the upstream', async (t) => {
  const texts = [JSON.stringify(rootOpenApi(merchants, ctx)), ...merchants.map((m) => JSON.stringify(merchantOpenApi(m, ctx)))];
  for (const text of texts) t.notMatch(text, /hidden-origin|TOP-SECRET-VALUE|x-api-key|secretHeaders|baseUrl/);
});

t.test('chain-stocks served in-process is discovered exactly as before', async (t) => {
  const inProcess = merchants.map((m): Merchant => (m.slug === 'chain-stocks' ? { ...m, upstream: { kind: 'internal', name: 'stock-data' } } : m));
  t.same(rootOpenApi(inProcess, ctx), rootOpenApi(merchants, ctx), 'the index');
  const stocks = inProcess.find((m) => m.slug === 'chain-stocks')!;
  t.same(merchantOpenApi(stocks, ctx), merchantOpenApi(merchants.find((m) => m.slug === 'chain-stocks')!, ctx), 'its own document');
  t.same(wellKnownX402(inProcess, BASE_URL), wellKnownX402(merchants, BASE_URL), '/.well-known/x402');
  t.notMatch(JSON.stringify(merchantOpenApi(stocks, ctx)), /stock-data|"internal"/);
});

t.test('merchants without shapes, on other networks, with files', async (t) => {
  const plain: Merchant = {
    ...merchants[0]!,
    slug: 'acme',
    name: 'Acme',
    description: 'A registered merchant.',
    networks: ['eip155:8453'],
    routes: [{ route: 'data', methods: ['GET', 'POST'], priceUsd: '0.250000', summary: 'Data', description: 'Some data.', input: 'anything', operationId: 'acme-data' }],
  };
  const doc = merchantOpenApi(plain, ctx);
  await validate(doc);
  t.same(semanticProblems(doc), []);
  const ops = operations(doc);
  t.same(
    ops.map((o) => [o.method, o.path, o.op.operationId]),
    [
      ['GET', '/m/acme/data', 'acme-data'],
      ['POST', '/m/acme/data', 'acme-data-post'],
    ],
  );
  const info = ops[0]!.op['x-payment-info'];
  t.same([info.network, info.currency, info.amount, info.extra], ['eip155:8453', COIN_A, '250000', { name: 'USD Coin', version: '2' }], 'EIP-3009 offer first when the stock chain is not accepted');
  t.same(info.protocols[0], { mpp: { method: 'evm', intent: 'charge', currency: COIN_A } });
  t.same((ops[0]!.op['x-payment-offers'] as unknown[]).length, 1);
  t.match(ops[0]!.op.parameters, [{ name: 'params', in: 'query', style: 'form', explode: true, schema: { type: 'object', additionalProperties: true } }]);
  t.match(ops[1]!.op.requestBody, { required: false, content: { 'application/json': { schema: { type: 'object' } } } });

  const file: Merchant = { ...plain, upstream: { kind: 'file', sha256: 'cd'.repeat(32), contentType: 'application/pdf', size: 4096, fileName: 'secret-name.pdf' } };
  const fileDoc = merchantOpenApi(file, ctx);
  await validate(fileDoc);
  t.match((operations(fileDoc)[0]!.op.responses as Record<string, unknown>)['200'], { content: { 'application/pdf': {} } });
  t.notMatch(JSON.stringify(fileDoc), /secret-name/);

  t.throws(() => merchantOpenApi({ ...plain, networks: ['eip155:1'] }, ctx), DiscoveryError);
  t.throws(() => rootOpenApi([plain, plain], ctx), DiscoveryError, 'duplicate slugs are refused');

  const noProxy = new NetworkRegistry([{ ...STOCK, exactPermit2Proxy: undefined } as Network]);
  const stockOnly = merchantOpenApi({ ...plain, networks: ['eip155:4663'] }, { ...ctx, networks: noProxy });
  t.same(operations(stockOnly)[0]!.op['x-payment-info'].extra, { assetTransferMethod: 'permit2', spender: EXACT_PERMIT2_PROXY_ADDRESS }, 'the canonical proxy by default');
});

t.test('/.well-known/x402 lists every paid route', async (t) => {
  const wk = wellKnownX402(merchants, 'https://pay.example.test/');
  t.equal(wk.version, 1);
  t.same(
    wk.resources,
    reference.map((r) => `${BASE_URL}${r.path}`),
  );
  t.same(wellKnownX402([], BASE_URL), { version: 1, resources: [] });
});
