/**
 * Discovery documents and merchant lists built once per change: a registration, update or delete shows in the next
 * document (and changes its ETag), an unchanged document revalidates as 304, each encoding decodes to the same bytes,
 * the list pages, and the per-wallet and per-merchant bounds refuse with a clear 4xx. Real LMDB, a real uWS server.
 */
import t, { type Test } from 'tap';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS } from '../src/chain/canonical.ts';
import { discoveryResourcesHandler } from '../src/facilitator/discovery-resources.ts';
import { NetworkRegistry } from '../src/chain/networks.ts';
import type { Merchant } from '../src/gateway/catalog/merchant.ts';
import { buildDocument, chooseCoding } from '../src/gateway/discovery/built-document.ts';
import { MerchantSnapshot } from '../src/gateway/discovery/merchant-snapshot.ts';
import { discoveryRoutes } from '../src/gateway/discovery/routes.ts';
import { merchantHandlers } from '../src/gateway/merchants/http.ts';
import { MerchantRegistry } from '../src/gateway/merchants/registry.ts';
import { registrationTypedData } from '../src/gateway/merchants/signature.ts';
import type { Registration, RegistrationRequest } from '../src/gateway/merchants/types.ts';
import { createHttpServer } from '../src/http/server.ts';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import { tempDir } from './helpers/temp-dir.ts';

const NETWORK = 'eip155:8453';
const networks = new NetworkRegistry([
  {
    caip2: NETWORK,
    chainId: 8453,
    rpcUrl: 'http://127.0.0.1:1',
    stablecoin: { address: '0x000000000000000000000000000000000000a0A0', name: 'USD Coin', version: '2', decimals: 6, symbol: 'USDC' },
    permit2: PERMIT2_ADDRESS,
    exactPermit2Proxy: EXACT_PERMIT2_PROXY_ADDRESS,
  },
]);

let nonces = 0;
function registration(payTo: `0x${string}`, slug: string, overrides: Partial<Registration> = {}): Registration {
  return {
    action: 'register',
    slug,
    name: `Merchant ${slug}`,
    description: 'Sells facts.',
    payTo,
    networks: [NETWORK],
    upstream: { kind: 'file', fileName: 'fact.txt', contentType: 'text/plain', contentBase64: 'aGk=' },
    routes: [{ route: 'fact', methods: ['GET'], priceUsd: '0.010000', summary: `A fact from ${slug}`, description: 'One fact.', input: '' }],
    nonce: `nonce-${++nonces}-${Math.random().toString(36).slice(2)}`,
    issuedAt: Math.floor(Date.now() / 1000),
    ...overrides,
  };
}

async function signed(account: PrivateKeyAccount, reg: Registration | Record<string, unknown>): Promise<RegistrationRequest> {
  return { registration: reg as Registration, signature: await account.signTypedData(registrationTypedData(reg as Registration)) };
}

async function setup(t: Test, extra: Partial<ConstructorParameters<typeof MerchantRegistry>[0]> = {}) {
  const dir = tempDir('discovery-cache');
  const store = openLmdbStore(join(dir, 'db'));
  const registry = new MerchantRegistry({ store, networks, filesDir: join(dir, 'files'), ...extra });
  const snapshot = new MerchantSnapshot(registry);
  const server = createHttpServer({ host: '127.0.0.1', port: 0, maxBodyBytes: 1024 * 1024 });
  for (const r of discoveryRoutes({ snapshot, networks, baseUrl: 'https://pay.example.test', contactEmail: 'ops@example.test', realm: 'pay.example.test', llmsMaxAgeSeconds: 5 }))
    server.route(r.method, r.path, r.handler);
  const h = merchantHandlers({ registry, snapshot });
  server.route('POST', '/api/merchants', h.register).route('GET', '/api/merchants', h.list);
  const port = await server.listen();
  t.teardown(async () => {
    snapshot.close();
    await server.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const base = `http://127.0.0.1:${port}`;
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}${path}`, { headers });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };
  const post = async (body: unknown) => {
    const res = await fetch(`${base}/api/merchants`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as { error?: string } };
  };
  return { registry, snapshot, get, post, base };
}

t.test('a registered, updated or deleted merchant shows in the next document, whose ETag changes', async (t) => {
  const { get, post } = await setup(t);
  const owner = privateKeyToAccount(generatePrivateKey());
  const paths = ['/openapi.json', '/.well-known/x402', '/llms.txt', '/api/merchants'];
  const before: Record<string, string> = {};
  for (const p of paths) {
    const r = await get(p);
    t.equal(r.status, 200, `${p} answers`);
    t.notMatch(r.text, /fresh-facts/, `${p}: not there yet`);
    before[p] = r.headers.get('etag') ?? '';
    t.match(before[p], /^"[A-Za-z0-9_-]+"$/, `${p}: a strong ETag`);
    t.equal((await get(p, { 'if-none-match': before[p] })).status, 304, `${p}: unchanged, revalidation is a 304`);
  }

  t.equal((await post(await signed(owner, registration(owner.address, 'fresh-facts')))).status, 201);
  const after: Record<string, string> = {};
  for (const p of paths) {
    const r = await get(p, { 'if-none-match': before[p] as string });
    t.equal(r.status, 200, `${p}: the old ETag no longer matches`);
    t.match(r.text, /fresh-facts/, `${p}: the new merchant is in the very next document`);
    after[p] = r.headers.get('etag') ?? '';
    t.not(after[p], before[p], `${p}: a new ETag`);
  }
  const own = await get('/m/fresh-facts/openapi.json');
  t.equal(own.status, 200);
  t.match(own.text, /A fact from fresh-facts/);

  t.equal((await post(await signed(owner, registration(owner.address, 'fresh-facts', { action: 'update', description: 'Now with sources.' })))).status, 200);
  t.match((await get('/openapi.json')).text, /Now with sources\./, 'an update shows in the next index');
  t.match((await get('/m/fresh-facts/openapi.json')).text, /Now with sources\./, 'and in the merchant document');
  t.match((await get('/api/merchants')).text, /Now with sources\./, 'and in the list');

  const gone = await post(await signed(owner, { action: 'delete', slug: 'fresh-facts', payTo: owner.address, nonce: `delete-${Date.now()}`, issuedAt: Math.floor(Date.now() / 1000) }));
  t.equal(gone.status, 200);
  for (const p of paths) t.notMatch((await get(p)).text, /fresh-facts/, `${p}: a deleted merchant is gone from the next document`);
  t.equal((await get('/m/fresh-facts/openapi.json')).status, 404);
});

t.test('a change told by another node (forget) shows too; documents are built once per change', async (t) => {
  const { registry, snapshot, get, post } = await setup(t);
  const owner = privateKeyToAccount(generatePrivateKey());
  t.equal((await post(await signed(owner, registration(owner.address, 'facts-one')))).status, 201);
  const first = await get('/openapi.json');
  const built = snapshot.peek('openapi');
  t.ok(built, 'built once');
  await get('/openapi.json');
  t.equal(snapshot.peek('openapi'), built, 'a second request reuses the build');
  registry.forget('facts-one');
  t.equal(snapshot.peek('openapi'), undefined, 'a change drops what was built');
  const again = await get('/openapi.json');
  t.equal(again.headers.get('etag'), first.headers.get('etag'), 'the same content has the same ETag after a rebuild');
  t.equal(snapshot.count, 1, '/health counts from the loaded list');
});

t.test('a directory that tells no changes is read again after maxAgeMs (logical clock)', async (t) => {
  let now = 1000;
  let merchants: Merchant[] = [];
  let reads = 0;
  const snapshot = new MerchantSnapshot(
    {
      list: async () => {
        reads++;
        return merchants;
      },
    },
    { maxAgeMs: 5000, now: () => now },
  );
  t.equal((await snapshot.current()).merchants.length, 0);
  merchants = [{ slug: 'x' } as Merchant];
  now += 4999;
  t.equal((await snapshot.current()).merchants.length, 0, 'kept within maxAgeMs');
  now += 1;
  t.equal((await snapshot.current()).merchants.length, 1, 'read again after it');
  t.equal(reads, 2);
  snapshot.close();
});

t.test('encodings: br, then gzip, else identity; each decodes to the same document', async (t) => {
  const { get, base } = await setup(t);
  const plain = await get('/openapi.json', { 'accept-encoding': 'identity' });
  t.equal(plain.headers.get('content-encoding'), null);
  t.match(plain.headers.get('vary') ?? '', /accept-encoding/i);
  for (const [accept, coding] of [
    ['gzip, deflate, br', 'br'],
    ['gzip', 'gzip'],
    ['br;q=0, gzip', 'gzip'],
  ] as const) {
    const res = await fetch(`${base}/openapi.json`, { headers: { 'accept-encoding': accept } });
    t.ok(res.ok);
    t.equal(res.headers.get('content-encoding'), coding, `${accept}: ${coding}`);
    t.equal(await res.text(), plain.text, `${accept}: the same document once decoded`);
  }
  t.equal(chooseCoding(undefined), 'identity');
  t.equal(chooseCoding('*'), 'br');
  t.equal(chooseCoding('*;q=0'), 'identity');
  const doc = buildDocument('x'.repeat(5000), { 'content-type': 'text/plain' });
  t.equal(gunzipSync(doc.encoded('gzip')).toString(), 'x'.repeat(5000));
  t.equal(brotliDecompressSync(doc.encoded('br')).toString(), 'x'.repeat(5000));
  t.equal(doc.respond({ headers: { 'if-none-match': `W/${doc.etag}` } }).status, 304, 'a weak If-None-Match matches too');
  t.equal(doc.respond({ headers: { 'if-none-match': '"other"' } }).status, 200);
  t.equal(buildDocument('tiny', {}).respond({ headers: { 'accept-encoding': 'br' } }).headers?.['content-encoding'], undefined, 'a tiny document is sent as it is');
});

t.test('the merchant list pages, filters by owner, and refuses a bad query', async (t) => {
  const { get, post } = await setup(t);
  const a = privateKeyToAccount(generatePrivateKey());
  const b = privateKeyToAccount(generatePrivateKey());
  for (const slug of ['list-one', 'list-two', 'list-three']) t.equal((await post(await signed(a, registration(a.address, slug)))).status, 201);
  t.equal((await post(await signed(b, registration(b.address, 'list-four')))).status, 201);
  const all = JSON.parse((await get('/api/merchants')).text);
  t.equal(all.merchants.length, 4);
  t.same(all.pagination, { limit: 100, offset: 0, total: 4 });
  t.equal(all.next, null);
  const first = JSON.parse((await get('/api/merchants?limit=3')).text);
  t.equal(first.merchants.length, 3);
  t.equal(first.next, '/api/merchants?limit=3&offset=3');
  const rest = JSON.parse((await get(first.next)).text);
  t.same(
    [...first.merchants, ...rest.merchants].map((m: { slug: string }) => m.slug),
    all.merchants.map((m: { slug: string }) => m.slug),
    'the pages together are the list',
  );
  const mine = JSON.parse((await get(`/api/merchants?owner=${b.address}`)).text);
  t.same(
    mine.merchants.map((m: { slug: string }) => m.slug),
    ['list-four'],
  );
  for (const q of ['limit=0', 'limit=101', 'offset=-1', 'owner=bob', 'limit=1&limit=2']) {
    const r = await get(`/api/merchants?${q}`);
    t.equal(r.status, 400, `${q}: 400`);
    t.match(JSON.parse(r.text), { error: /./ });
  }
});

t.test('per-wallet and per-merchant bounds refuse with a clear 4xx, concurrent registrations included', async (t) => {
  const { registry, get, post } = await setup(t, { maxMerchantsPerWallet: 2, size: { maxTextBytes: 4096 } });
  const owner = privateKeyToAccount(generatePrivateKey());
  const tries = await Promise.all(['quota-a', 'quota-b', 'quota-c', 'quota-d', 'quota-e'].map(async (slug) => post(await signed(owner, registration(owner.address, slug)))));
  t.same(tries.map((r) => r.status).sort(), [201, 201, 403, 403, 403], 'five at once: exactly two pass the quota of two');
  t.match(tries.find((r) => r.status === 403)?.body, { error: /already holds 2 merchants, the most one wallet may register \(2\)/ });
  t.equal((await registry.list()).length, 2, 'nothing stored for the refused ones');
  const live = tries.flatMap((r, i) => (r.status === 201 ? [`quota-${'abcde'[i]}`] : []));
  const gone = await post(await signed(owner, { action: 'delete', slug: live[0], payTo: owner.address, nonce: `delete-${Date.now()}`, issuedAt: Math.floor(Date.now() / 1000) }));
  t.equal(gone.status, 200);
  t.equal((await post(await signed(owner, registration(owner.address, 'quota-f')))).status, 201, 'a delete frees a place');

  const other = privateKeyToAccount(generatePrivateKey());
  const big = registration(other.address, 'too-big', {
    routes: Array.from({ length: 5 }, (_, i) => ({ route: `r${i}`, methods: ['GET'] as ['GET'], priceUsd: '0.010000', summary: 'x', description: 'd'.repeat(1000), input: '' })),
  });
  const refused = await post(await signed(other, big));
  t.equal(refused.status, 400);
  t.match(refused.body, { error: /text .* is \d+ bytes, over the 4096 allowed/ });
  t.notMatch((await get('/openapi.json')).text, /too-big/);
  const fits = await post(await signed(other, registration(other.address, 'fits')));
  t.equal(fits.status, 201);
  const update = await post(await signed(other, { ...big, slug: 'fits', action: 'update' }));
  t.equal(update.status, 400, 'an update over the bound is refused too');
});

t.test("the facilitator's bazaar listing: each page built once per listing, revalidated by ETag, rebuilt for a new listing", async (t) => {
  const item = (i: number) => ({ type: 'http', resource: `https://pay.example.test/m/s/r${i}`, accepts: [{ scheme: 'exact', network: NETWORK, payTo: `0x${'ab'.repeat(20)}` }] });
  let listing = Array.from({ length: 30 }, (_, i) => item(i));
  let calls = 0;
  const handler = discoveryResourcesHandler(() => {
    calls++;
    return listing;
  });
  const ask = async (query: string, headers: Record<string, string> = {}) =>
    handler({ method: 'GET', path: '/discovery/resources', query, headers, remoteIp: '127.0.0.1', params: {}, body: async () => new Uint8Array() });
  const first = await ask('limit=10&offset=5');
  t.equal(first.status, 200);
  t.equal(await ask('limit=10&offset=5'), first, 'the same page is the same built answer');
  const body = JSON.parse(Buffer.from(first.body as Uint8Array).toString());
  t.same(body.pagination, { limit: 10, offset: 5, total: 30 });
  t.equal(body.items[0].resource, 'https://pay.example.test/m/s/r5');
  const etag = first.headers?.etag as string;
  t.equal((await ask('limit=10&offset=5', { 'if-none-match': etag })).status, 304);
  t.equal((await ask('limit=0')).status, 400);
  listing = [item(99)];
  const changed = await ask('limit=10&offset=0', { 'if-none-match': etag });
  t.equal(changed.status, 200, 'a new listing is a new page');
  t.match(Buffer.from(changed.body as Uint8Array).toString(), /r99/);
  t.equal(calls, 4, 'the listing is asked once per request that parses (it is the caller who keeps it)');
});
