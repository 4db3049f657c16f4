/**
 * The merchant model and the built-in catalog, against the shared route table
 * (`../shared/reference/routes.json` from the repository root when present, else the committed copy).
 */
import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  builtinCatalog,
  CATALOG_ROUTES,
  CATALOG_SLUGS,
  INTERNAL_UPSTREAMS,
  LLM_MODEL_ALIASES,
  ModelAliasError,
  PRODUCTION_UPSTREAMS,
  resolveModelAlias,
  resolveModelAliasInBody,
  type CatalogRouteRecord,
} from '../src/devnet/catalog/catalog.ts';
import { amountAtomic, findRoute, publicMerchant, routePath, type Merchant, type MerchantRoute } from '../src/gateway/catalog/merchant.ts';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const SHARED = `${REPO}../shared/reference/routes.json`;
const COMMITTED = `${REPO}src/devnet/catalog/routes.json`;
const reference: CatalogRouteRecord[] = existsSync(SHARED)
  ? (JSON.parse(readFileSync(SHARED, 'utf8')) as { routes: CatalogRouteRecord[] }).routes
  : (JSON.parse(readFileSync(COMMITTED, 'utf8')) as CatalogRouteRecord[]);
if (!existsSync(SHARED)) t.comment(`${SHARED} not found: checking against the committed copy`);

const PAY_TO = (slug: string): `0x${string}` => `0x${Buffer.from(slug.padEnd(20, '.').slice(0, 20)).toString('hex')}`;
const OWNER = '0x00000000000000000000000000000000000000aa' as const;
const NETWORKS = ['eip155:4663', 'eip155:8453', 'eip155:84532'];

function catalog(): Merchant[] {
  return builtinCatalog({
    payTo: PAY_TO,
    networks: NETWORKS,
    upstreamFor: (slug) => ({ kind: 'url', baseUrl: `http://upstream.invalid/${slug}`, secretHeaders: { 'x-api-key': `secret-${slug}` } }),
    owner: OWNER,
    now: 1_700_000_000_000,
  });
}

t.test('the committed route table is the shared one', async (t) => {
  t.equal(reference.length, 40);
  t.same(JSON.parse(readFileSync(COMMITTED, 'utf8')), reference);
  t.same(CATALOG_ROUTES, reference);
});

t.test('builtinCatalog: one merchant per slug with exactly the listed routes', async (t) => {
  const merchants = catalog();
  t.same(
    merchants.map((m) => m.slug),
    [...new Set(reference.map((r) => r.slug))],
    'one merchant per slug, in table order',
  );
  t.same(
    CATALOG_SLUGS,
    merchants.map((m) => m.slug),
  );
  const flat = merchants.flatMap((m) => m.routes.map((r) => ({ m, r })));
  t.equal(flat.length, 40);
  for (const ref of reference) {
    const m = merchants.find((x) => x.slug === ref.slug)!;
    const r = findRoute(m, ref.route);
    if (!t.ok(r, `${ref.path} exists`) || !r) continue;
    t.equal(routePath(m.slug, r.route), ref.path);
    t.same(r.methods, ref.methods, `${ref.path} methods`);
    t.equal(r.priceUsd, ref.priceUsd, `${ref.path} price`);
    t.equal(amountAtomic(r).toString(), ref.amountAtomic, `${ref.path} atomic`);
    t.equal(r.input, ref.input);
    t.equal(r.operationId, ref.operationId);
    t.ok(r.summary.length > 0 && r.summary.length <= 60, `${ref.path} short summary`);
    t.ok(r.description.length > r.summary.length, `${ref.path} description`);
  }
  for (const m of merchants) {
    t.ok(m.name.length > 0 && m.description.length > 0);
    t.equal(m.payTo, PAY_TO(m.slug));
    t.same(m.networks, NETWORKS);
    t.equal(m.owner, OWNER);
    t.equal(m.createdAt, 1_700_000_000_000);
    t.equal(m.updatedAt, 1_700_000_000_000);
    t.same(m.upstream, { kind: 'url', baseUrl: `http://upstream.invalid/${m.slug}`, secretHeaders: { 'x-api-key': `secret-${m.slug}` } });
  }
  t.equal(findRoute(merchants[0]!, 'nope'), undefined);
});

t.test('chain-stocks is served in-process exactly when the gateway runs the stock-data upstream', async (t) => {
  t.same(INTERNAL_UPSTREAMS, { 'chain-stocks': 'stock-data' });
  const upstreamFor = (slug: string) => ({ kind: 'url' as const, baseUrl: `http://upstream.invalid/${slug}`, secretHeaders: {} });
  const served = builtinCatalog({ payTo: PAY_TO, networks: NETWORKS, upstreamFor, internal: new Set(['stock-data'] as const), owner: OWNER, now: 1 });
  const off = builtinCatalog({ payTo: PAY_TO, networks: NETWORKS, upstreamFor, internal: new Set(), owner: OWNER, now: 1 });
  for (const [i, m] of served.entries()) {
    t.same(m.upstream, m.slug === 'chain-stocks' ? { kind: 'internal', name: 'stock-data' } : upstreamFor(m.slug), `${m.slug} upstream`);
    t.same(off[i]!.upstream, upstreamFor(m.slug), `${m.slug} upstream with the stock API off`);
    t.same({ ...m, upstream: null }, { ...off[i]!, upstream: null }, `${m.slug}: nothing else differs`);
  }
  const pub = publicMerchant(served[0]!);
  t.same(pub.upstream, { kind: 'url' }, 'the public view does not tell an in-process upstream from a URL one');
  t.same(pub, publicMerchant(off[0]!));
  t.notMatch(JSON.stringify(pub), /internal|stock-data/);
});

t.test('every call builds fresh merchants', async (t) => {
  const a = catalog();
  a[0]!.routes[0]!.methods.push('POST');
  a[0]!.routes[0]!.shape!.query!.pop();
  a[0]!.networks.pop();
  const b = catalog();
  t.same(b[0]!.routes[0]!.methods, reference[0]!.methods);
  t.equal(b[0]!.routes[0]!.shape!.query!.length, 2);
  t.same(b[0]!.networks, NETWORKS);
});

t.test('route shapes are consistent', async (t) => {
  for (const m of catalog()) {
    for (const r of m.routes) {
      const shape = r.shape!;
      t.ok(shape, `${r.operationId} has a shape`);
      const takesSegments = /appended/.test(r.input);
      t.equal((shape.segments?.length ?? 0) > 0, takesSegments, `${r.operationId}: appended segments documented iff the input says so`);
      const keys = new Set<string>();
      for (const s of shape.segments ?? []) {
        t.notOk(keys.has(s.key), `${r.operationId}: unique segments key ${s.key}`);
        keys.add(s.key);
        const names = [...s.template.matchAll(/\{([^}]+)\}/g)].map((x) => x[1]);
        t.same(names.sort(), s.parameters.map((p) => p.name).sort(), `${r.operationId}/${s.template}: every template parameter is declared`);
        t.ok(s.parameters.every((p) => p.required === true));
      }
      t.equal(shape.body !== undefined, r.methods.includes('POST'), `${r.operationId}: a body shape iff POST`);
      if (/query `params`/.test(r.input)) t.ok(shape.freeFormQuery, `${r.operationId}: free-form params`);
    }
  }
  const tvl = catalog()
    .find((m) => m.slug === 'defi')!
    .routes.find((r) => r.route === 'tvl')!;
  t.equal(tvl.shape?.response, 'number', 'defi/tvl returns a bare number');
});

t.test('amountAtomic, routePath', async (t) => {
  const route = { priceUsd: '1.000000', operationId: 'x-y' } as MerchantRoute;
  t.equal(amountAtomic(route), 1_000_000n);
  t.equal(amountAtomic({ ...route, priceUsd: '0.005000' }), 5000n);
  t.throws(() => amountAtomic({ ...route, priceUsd: '0.0000001' }), /malformed priceUsd/);
  t.throws(() => amountAtomic({ ...route, priceUsd: '-1' }));
  t.equal(routePath('wiki', 'summary'), '/m/wiki/summary');
});

t.test('publicMerchant never carries the upstream origin, its secrets or a file name', async (t) => {
  const m = catalog()[0]!;
  const tainted = Object.assign({}, m, { internalNote: 'do-not-leak' }) as Merchant;
  const pub = publicMerchant(tainted);
  t.same(pub.upstream, { kind: 'url' });
  const text = JSON.stringify(pub);
  t.notMatch(text, /upstream\.invalid|secret-|x-api-key|baseUrl|secretHeaders|do-not-leak/);
  t.same(Object.keys(pub).sort(), ['createdAt', 'description', 'name', 'networks', 'owner', 'payTo', 'routes', 'slug', 'updatedAt', 'upstream']);
  t.same(pub.routes, m.routes);
  pub.routes[0]!.methods.pop();
  t.equal(m.routes[0]!.methods.length, 2, 'routes are copies');

  const file: Merchant = { ...m, upstream: { kind: 'file', sha256: 'ab'.repeat(32), contentType: 'application/pdf', size: 1234, fileName: 'private-name.pdf' } };
  const pubFile = publicMerchant(file);
  t.same(pubFile.upstream, { kind: 'file', sha256: 'ab'.repeat(32), contentType: 'application/pdf', size: 1234 });
  t.notMatch(JSON.stringify(pubFile), /private-name/);
});

t.test('production upstreams: one https base URL per slug', async (t) => {
  t.same(Object.keys(PRODUCTION_UPSTREAMS).sort(), [...CATALOG_SLUGS].sort());
  for (const [slug, url] of Object.entries(PRODUCTION_UPSTREAMS)) {
    const u = new URL(url);
    t.equal(u.protocol, 'https:', slug);
    t.notOk(url.endsWith('/'), `${slug}: no trailing slash`);
    t.equal(u.search + u.hash, '', `${slug}: no query or fragment`);
  }
});

/** The code of the ModelAliasError `fn` throws ('no error' / 'other error' otherwise). */
function errorCode(fn: () => unknown): string {
  try {
    fn();
    return 'no error';
  } catch (err) {
    return err instanceof ModelAliasError ? err.code : 'other error';
  }
}

t.test('LLM model aliases', async (t) => {
  t.same(Object.keys(LLM_MODEL_ALIASES).sort(), ['llm-balanced', 'llm-deep', 'llm-fast', 'llm-open']);
  for (const id of Object.values(LLM_MODEL_ALIASES)) t.match(id, /^[^/]+\/[^/]+$/, 'defaults are vendor/model ids');
  const aliases = { 'llm-fast': 'v/fast', 'llm-balanced': 'v/balanced', 'llm-deep': 'v/deep', 'llm-open': 'o/open' };

  const body = { model: 'llm-deep', messages: [{ role: 'user', content: 'hi' }], temperature: 0 };
  const out = resolveModelAlias(body, aliases);
  t.same(out, { model: 'v/deep', messages: body.messages, temperature: 0 });
  t.same(Object.keys(out), ['model', 'messages', 'temperature'], 'key order kept');
  t.equal(body.model, 'llm-deep', 'the input is not mutated');
  t.equal(resolveModelAlias({ model: 'llm-fast', messages: [] }).model, LLM_MODEL_ALIASES['llm-fast'], 'defaults');

  const full = { model: 'mistralai/mistral-7b-instruct:free', messages: [] };
  t.equal(resolveModelAlias(full, aliases), full, 'a full id is left as it is');

  const bad: [unknown, string][] = [
    [null, 'body_not_object'],
    [[], 'body_not_object'],
    ['llm-fast', 'body_not_object'],
    [{ messages: [] }, 'model_missing'],
    [{ model: 7 }, 'model_not_string'],
    [{ model: 'gpt-4o' }, 'model_unknown'],
    [{ model: 'llm-fastest' }, 'model_unknown'],
    [{ model: 'a/b/c' }, 'model_unknown'],
    [{ model: '/model' }, 'model_unknown'],
    [{ model: 'vendor/' }, 'model_unknown'],
    [{ model: 'vendor/mo del' }, 'model_unknown'],
  ];
  for (const [input, code] of bad) {
    t.equal(
      errorCode(() => resolveModelAlias(input, aliases)),
      code,
      `${JSON.stringify(input)} -> ${code}`,
    );
  }

  const raw = new TextEncoder().encode('{"model":"anthropic/claude-3.5-sonnet","messages":[ ]}');
  const same = resolveModelAliasInBody(raw, aliases);
  t.equal(same.body, raw, 'bytes forwarded verbatim when nothing changes');
  t.same([same.model, same.rewritten], ['anthropic/claude-3.5-sonnet', false]);
  const rewritten = resolveModelAliasInBody(new TextEncoder().encode('{"model":"llm-open","messages":[]}'), aliases);
  t.same([new TextDecoder().decode(rewritten.body), rewritten.model, rewritten.rewritten], ['{"model":"o/open","messages":[]}', 'o/open', true]);
  t.equal(
    errorCode(() => resolveModelAliasInBody(new TextEncoder().encode('{nope'), aliases)),
    'body_not_json',
  );
  t.equal(
    errorCode(() => resolveModelAliasInBody(new Uint8Array([0xff, 0xfe]), aliases)),
    'body_not_json',
  );
});
