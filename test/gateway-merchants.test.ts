/**
 * Merchant self-registration: validation, EIP-712 signatures by payTo, ownership, nonce replay, content-addressed
 * uploads, built-in seeding, and the HTTP handlers over real sockets (no secret ever leaves the gateway).
 * Real LMDB in a temporary directory; DNS is injected.
 */
import t, { type Test } from 'tap';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { keccak256, stringToBytes, type Hex } from 'viem';
import type { Merchant } from '../src/gateway/catalog/merchant.ts';
import { mountMerchantRoutes } from '../src/gateway/merchants/http.ts';
import { MerchantRegistry, type RegistryResult } from '../src/gateway/merchants/registry.ts';
import { REGISTRATION_DOMAIN, REGISTRATION_TYPES, registrationDigest, registrationDigestPreimage, registrationTypedData } from '../src/gateway/merchants/signature.ts';
import type { Registration, RegistrationRequest } from '../src/gateway/merchants/types.ts';
import { merchantConfigFromEnv } from '../src/gateway/merchants/config.ts';
import { checkContentType, checkPayTo, registrationBodyLimit } from '../src/gateway/merchants/validate.ts';
import { ConfigError } from '../src/config/env.ts';
import type { Resolver } from '../src/gateway/upstream-guard/guard.ts';
import { createHttpServer } from '../src/http/server.ts';
import { createLogger } from '../src/log/logger.ts';
import { canonicalJson } from '../src/protocol/mpp/canonical-json.ts';
import { openLmdbStore } from '../src/store/lmdb/open-lmdb-store.ts';
import { tempDir } from './helpers/temp-dir.ts';

const NOW = 1_750_000_000_000; // unix ms
const NOW_S = NOW / 1000;
const NETWORKS = new Set(['eip155:8453', 'eip155:84532']);
const SECRET_VALUE = 'Bearer sk-live-very-secret-0123456789';
const UPSTREAM_HOST = 'api.upstream-merchant.example';

const resolve: Resolver = async (host) => {
  const table: Record<string, string[]> = {
    [UPSTREAM_HOST]: ['93.184.216.34'],
    'other.example': ['2606:2800:220:1:248:1893:25c8:1946'],
    'internal.example': ['10.0.0.5'],
    'sneaky.example': ['93.184.216.34', '::ffff:192.168.0.1'],
  };
  const a = table[host];
  if (!a) throw new Error(`ENOTFOUND ${host}`);
  return a;
};

let nonceCounter = 0;
const freshNonce = () => `nonce-${Date.now()}-${++nonceCounter}-${Math.random().toString(36).slice(2)}`;

function registration(payTo: `0x${string}`, overrides: Partial<Registration> = {}): Registration {
  return {
    action: 'register',
    slug: 'weather-pro',
    name: 'Weather Pro',
    description: 'Forecasts.\nFor agents.',
    payTo,
    networks: ['eip155:8453'],
    upstream: { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/v1`, secretHeaders: { Authorization: SECRET_VALUE } },
    routes: [
      { route: 'forecast', methods: ['GET', 'POST'], priceUsd: '0.010000', summary: 'A forecast', description: 'Seven days.', input: 'query `city`' },
      { route: 'now', methods: ['GET'], priceUsd: '0.000001', summary: 'Current weather', description: '', input: '' },
    ],
    nonce: freshNonce(),
    issuedAt: NOW_S,
    ...overrides,
  };
}

async function signed(account: PrivateKeyAccount, reg: Registration | Record<string, unknown>): Promise<RegistrationRequest> {
  let signature: Hex;
  try {
    signature = await account.signTypedData(registrationTypedData(reg as Registration));
  } catch {
    signature = `0x${'11'.repeat(65)}`; // unsignable (e.g. a malformed payTo): the validator must refuse it first
  }
  return { registration: reg as Registration, signature };
}

function setup(t: { teardown(fn: () => unknown): void }, extra: Partial<ConstructorParameters<typeof MerchantRegistry>[0]> = {}) {
  const dir = tempDir('merchants');
  const store = openLmdbStore(join(dir, 'db'));
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const filesDir = join(dir, 'files');
  const registry = new MerchantRegistry({
    store,
    networks: { has: (n) => NETWORKS.has(n) },
    filesDir,
    resolve,
    upstreamAllowlist: ['127.0.0.1'],
    ...extra,
  });
  return { registry, filesDir, store };
}

const snapshot = async (registry: MerchantRegistry, slug: string): Promise<string> => {
  const r = canonicalJson((await registry.record(slug)) ?? null);
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
};

/** Runs a call that must be refused, and checks that the stored record of `slug` did not change at all. */
async function refused(t: Test, registry: MerchantRegistry, slug: string, call: () => Promise<RegistryResult>, status: number, error: RegExp, what: string): Promise<void> {
  const before = await snapshot(registry, slug);
  const r = await call();
  t.match(r, { ok: false, error: { status, message: error } }, what);
  t.equal(await snapshot(registry, slug), before, `${what}: the stored record is unchanged`);
}

/** The address with the case of its first letter flipped: a mixed-case address whose checksum is wrong. */
function flipCase(address: `0x${string}`): `0x${string}` {
  const i = address.slice(2).search(/[a-fA-F]/) + 2;
  const c = address[i]!;
  return `${address.slice(0, i)}${c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()}${address.slice(i + 1)}` as `0x${string}`;
}

const owner = privateKeyToAccount(generatePrivateKey());
const other = privateKeyToAccount(generatePrivateKey());

t.test('the EIP-712 message', async (t) => {
  const reg = registration(owner.address);
  const td = registrationTypedData(reg);
  t.same(td.domain, { name: 'gate402 merchants', version: '1' }, 'no chainId: registration is off-chain');
  t.equal(td.domain, REGISTRATION_DOMAIN);
  t.same(
    REGISTRATION_TYPES.MerchantRegistration.map((f) => `${f.type} ${f.name}`),
    ['string action', 'string slug', 'address payTo', 'bytes32 digest', 'string nonce', 'uint256 issuedAt'],
  );
  t.equal(td.primaryType, 'MerchantRegistration');
  const canonical = canonicalJson(reg);
  t.ok(canonical.ok);
  if (canonical.ok) t.equal(td.message.digest, keccak256(stringToBytes(canonical.value)), 'digest = keccak256(canonical JSON)');
  t.equal(registrationDigest({ ...reg }), registrationDigest(JSON.parse(JSON.stringify(reg)) as Registration), 'key order does not matter');
  t.not(registrationDigest({ ...reg, routes: [{ ...reg.routes[0]!, priceUsd: '0.020000' }, reg.routes[1]!] }), registrationDigest(reg), 'every field is covered');
  t.equal(td.message.issuedAt, BigInt(NOW_S));

  // A file upload is covered through the SHA-256 of its bytes (hashing megabytes with keccak in JS is too slow).
  const file = registration(owner.address, { upstream: { kind: 'file', fileName: 'a.txt', contentType: 'text/plain', contentBase64: Buffer.from('hello').toString('base64') } });
  const sha = createHash('sha256').update('hello').digest('hex');
  t.same(registrationDigestPreimage(file), { ...file, upstream: { kind: 'file', fileName: 'a.txt', contentType: 'text/plain', contentSha256: sha } });
  const pre = canonicalJson(registrationDigestPreimage(file));
  if (pre.ok) t.equal(registrationDigest(file), keccak256(stringToBytes(pre.value)));
  t.not(
    registrationDigest(file),
    registrationDigest({ ...file, upstream: { kind: 'file', fileName: 'a.txt', contentType: 'text/plain', contentBase64: Buffer.from('hellp').toString('base64') } }),
    'the content is covered',
  );
  t.throws(() => registrationDigest({ ...file, upstream: { kind: 'file', fileName: 'a.txt', contentType: 'text/plain', contentBase64: '!!' } }), TypeError);
});

t.test('register: stored, and the public view has no secrets', async (t) => {
  const { registry } = setup(t);
  const r = await registry.register(await signed(owner, registration(owner.address)), NOW);
  t.match(r, { ok: true, value: { action: 'register' } });
  const m = await registry.get('weather-pro');
  t.ok(m, 'stored');
  if (!m) return;
  t.equal(m.owner, owner.address);
  t.equal(m.payTo, owner.address);
  t.equal(m.createdAt, NOW);
  t.equal(m.updatedAt, NOW);
  t.same(m.upstream, { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/v1`, secretHeaders: { authorization: SECRET_VALUE } }, 'header names lower-cased');
  t.same(
    m.routes.map((r) => [r.route, r.operationId, r.methods, r.priceUsd]),
    [
      ['forecast', 'weather-pro-forecast', ['GET', 'POST'], '0.010000'],
      ['now', 'weather-pro-now', ['GET'], '0.000001'],
    ],
  );
  t.same(
    (await registry.list()).map((x) => x.slug),
    ['weather-pro'],
  );
  t.equal((await registry.record('weather-pro'))?.nonces.length, 1, 'the nonce is remembered');

  // A lower-case payTo is accepted and stored checksummed.
  const r2 = await registry.register(await signed(other, registration(other.address.toLowerCase() as `0x${string}`, { slug: 'lower-case' })), NOW);
  t.match(r2, { ok: true });
  t.equal((await registry.get('lower-case'))?.payTo, other.address);
  const third = privateKeyToAccount(generatePrivateKey());
  const upper = `0x${third.address.slice(2).toUpperCase()}` as `0x${string}`;
  t.match(await registry.register(await signed(third, registration(upper, { slug: 'upper-case' })), NOW), { ok: true }, 'an all-caps payTo too');
  t.equal((await registry.get('upper-case'))?.owner, third.address);
});

t.test('signatures', async (t) => {
  const { registry } = setup(t);
  const slug = 'weather-pro';
  const reg = registration(owner.address);
  const good = await signed(owner, reg);
  const flipped = (good.signature.slice(0, 10) + (good.signature[10] === 'a' ? 'b' : 'a') + good.signature.slice(11)) as Hex;
  await refused(t, registry, slug, () => registry.register({ ...good, signature: flipped }, NOW), 403, /signature/, 'a corrupted signature');
  await refused(t, registry, slug, () => registry.register({ ...good, signature: `0x${'00'.repeat(65)}` }, NOW), 403, /signature/, 'a zero signature');
  await refused(
    t,
    registry,
    slug,
    async () => registry.register(await signed(other, registration(owner.address)), NOW),
    403,
    /not a valid EIP-712 signature by payTo/,
    'signed by another wallet than payTo',
  );
  await refused(
    t,
    registry,
    slug,
    async () => {
      const s = await signed(owner, registration(owner.address));
      return registry.register({ ...s, registration: { ...s.registration, routes: [{ ...reg.routes[0]!, priceUsd: '0.000001' }] } }, NOW);
    },
    403,
    /signature/,
    'a registration changed after signing',
  );
  await refused(t, registry, slug, () => registry.register({ ...good, signature: '0x1234' }, NOW), 400, /signature: must be a 65-byte/, 'a malformed signature');
  t.equal(await registry.get(slug), undefined);
});

t.test('validation refusals (400), nothing stored', async (t) => {
  const { registry } = setup(t);
  const slug = 'weather-pro';
  const cases: [string, Partial<Registration> | Record<string, unknown>, RegExp][] = [
    ['price 0.01', { routes: [{ route: 'a', methods: ['GET'], priceUsd: '0.01', summary: 's', description: '', input: '' }] }, /priceUsd: must be a USD amount with exactly 6 fraction digits/],
    ['price -1.000000', { routes: [{ route: 'a', methods: ['GET'], priceUsd: '-1.000000', summary: 's', description: '', input: '' }] }, /priceUsd/],
    ['price 1e3', { routes: [{ route: 'a', methods: ['GET'], priceUsd: '1e3', summary: 's', description: '', input: '' }] }, /priceUsd/],
    ['price 1000.000001', { routes: [{ route: 'a', methods: ['GET'], priceUsd: '1000.000001', summary: 's', description: '', input: '' }] }, /between 0\.000001 and 1000\.000000/],
    ['price 0.000000', { routes: [{ route: 'a', methods: ['GET'], priceUsd: '0.000000', summary: 's', description: '', input: '' }] }, /between/],
    ['price as a number', { routes: [{ route: 'a', methods: ['GET'], priceUsd: 0.01, summary: 's', description: '', input: '' }] }, /priceUsd: must be string/],
    ['price 01.000000', { routes: [{ route: 'a', methods: ['GET'], priceUsd: '01.000000', summary: 's', description: '', input: '' }] }, /priceUsd/],
    ['no routes', { routes: [] }, /routes/],
    [
      'duplicate route',
      {
        routes: [
          { route: 'a', methods: ['GET'], priceUsd: '0.010000', summary: 's', description: '', input: '' },
          { route: 'a', methods: ['POST'], priceUsd: '0.010000', summary: 's', description: '', input: '' },
        ],
      },
      /route a is listed twice/,
    ],
    ['bad route name', { routes: [{ route: 'A/b', methods: ['GET'], priceUsd: '0.010000', summary: 's', description: '', input: '' }] }, /route: must be 1 to 63/],
    ['bad method', { routes: [{ route: 'a', methods: ['PUT'], priceUsd: '0.010000', summary: 's', description: '', input: '' }] }, /methods\/0: must be one of "GET", "POST"/],
    ['no methods', { routes: [{ route: 'a', methods: [], priceUsd: '0.010000', summary: 's', description: '', input: '' }] }, /methods/],
    ['control char in summary', { routes: [{ route: 'a', methods: ['GET'], priceUsd: '0.010000', summary: 'a\u0007b', description: '', input: '' }] }, /summary: must not contain control characters/],
    ['too long summary', { routes: [{ route: 'a', methods: ['GET'], priceUsd: '0.010000', summary: 'x'.repeat(201), description: '', input: '' }] }, /summary/],
    ['unknown route field', { routes: [{ route: 'a', methods: ['GET'], priceUsd: '0.010000', summary: 's', description: '', input: '', extra: 1 }] }, /extra: is not allowed/],
    [
      'too many routes',
      { routes: Array.from({ length: 101 }, (_, i) => ({ route: `r${i}`, methods: ['GET'], priceUsd: '0.010000', summary: 's', description: '', input: '' })) },
      /at most 100 routes/,
    ],
    ['reserved slug', { slug: 'admin' }, /slug admin is reserved/],
    ['reserved slug api', { slug: 'api' }, /reserved/],
    ['slug with a leading hyphen', { slug: '-abc' }, /slug: must be 3 to 40/],
    ['slug too short', { slug: 'ab' }, /slug/],
    ['upper-case slug', { slug: 'Weather' }, /slug/],
    ['wrong checksum', { payTo: '0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed' }, /wrong EIP-55 checksum/],
    ['wrong checksum (own address, one letter flipped)', { payTo: flipCase(owner.address) }, /wrong EIP-55 checksum/],
    ['zero address', { payTo: '0x0000000000000000000000000000000000000000' }, /zero address/],
    ['short address', { payTo: '0x1234' }, /payTo: must be a 0x-prefixed 20-byte hex address/],
    ['no networks', { networks: [] }, /networks/],
    ['unconfigured network', { networks: ['eip155:1'] }, /network eip155:1 is not supported/],
    ['stale', { issuedAt: NOW_S - 601 }, /issuedAt is 601 s old/],
    ['future', { issuedAt: NOW_S + 601 }, /in the future/],
    ['issuedAt in ms', { issuedAt: NOW }, /in the future/],
    ['short nonce', { nonce: 'abc' }, /nonce/],
    ['http upstream', { upstream: { kind: 'url', baseUrl: `http://${UPSTREAM_HOST}/` } }, /must be an https: URL/],
    ['credentials in URL', { upstream: { kind: 'url', baseUrl: `https://user:pw@${UPSTREAM_HOST}/` } }, /credentials/],
    ['fragment', { upstream: { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/#x` } }, /fragment/],
    ['ftp', { upstream: { kind: 'url', baseUrl: `ftp://${UPSTREAM_HOST}/` } }, /https/],
    ['relative URL', { upstream: { kind: 'url', baseUrl: '/v1' } }, /not a valid absolute URL/],
    ['whitespace in URL', { upstream: { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/a b` } }, /spaces/],
    ['hop-by-hop header', { upstream: { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/`, secretHeaders: { Connection: 'close' } } }, /secret header connection may not be set/],
    ['host header', { upstream: { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/`, secretHeaders: { host: 'x' } } }, /secret header host/],
    ['transfer-encoding header', { upstream: { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/`, secretHeaders: { 'Transfer-Encoding': 'chunked' } } }, /transfer-encoding/],
    ['bad header name', { upstream: { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/`, secretHeaders: { 'x key': 'v' } } }, /not a valid HTTP header name/],
    ['header value with newline', { upstream: { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/`, secretHeaders: { 'x-key': 'a\r\nInjected: 1' } } }, /printable ASCII/],
    ['duplicate header', { upstream: { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/`, secretHeaders: { 'X-Key': 'a', 'x-key': 'b' } } }, /given twice/],
    ['unknown upstream kind', { upstream: { kind: 'ftp' } }, /kind: must be one of/],
    ['an in-process upstream (built-in merchants only)', { upstream: { kind: 'internal', name: 'stock-data' } }, /kind: must be one of/],
    ['unknown field', { extra: true }, /extra: is not allowed/],
    ['html file', { upstream: { kind: 'file', fileName: 'a.html', contentType: 'text/html', contentBase64: 'PGI+aGk8L2I+' } }, /not allowed \(active content\)/],
    ['svg file', { upstream: { kind: 'file', fileName: 'a.svg', contentType: 'image/svg+xml', contentBase64: 'PHN2Zy8+' } }, /active content/],
    ['bad content type', { upstream: { kind: 'file', fileName: 'a.bin', contentType: 'nonsense', contentBase64: 'AAAA' } }, /contentType must be a media type/],
    ['not base64', { upstream: { kind: 'file', fileName: 'a.bin', contentType: 'application/octet-stream', contentBase64: 'not base64!' } }, /not canonical standard base64/],
    ['unpadded base64', { upstream: { kind: 'file', fileName: 'a.bin', contentType: 'application/octet-stream', contentBase64: 'aGk' } }, /not canonical standard base64/],
    ['base64 with whitespace', { upstream: { kind: 'file', fileName: 'a.bin', contentType: 'application/octet-stream', contentBase64: 'aGk=\n' } }, /not canonical standard base64/],
    ['empty file', { upstream: { kind: 'file', fileName: 'a.bin', contentType: 'application/octet-stream', contentBase64: '' } }, /empty/],
    ['path in file name', { upstream: { kind: 'file', fileName: '../etc/passwd', contentType: 'text/plain', contentBase64: 'AAAA' } }, /fileName/],
  ];
  for (const [what, overrides, error] of cases) {
    await refused(t, registry, slug, async () => registry.register(await signed(owner, { ...registration(owner.address), ...overrides }), NOW), 400, error, what);
  }
  t.equal((await registry.list()).length, 0);
  t.match(await registry.register(new TextEncoder().encode('{"registration":'), NOW), { ok: false, error: { code: 'invalid_registration', status: 400, message: /not JSON/ } }, 'malformed JSON');
  t.match(await registry.register([], NOW), { ok: false, error: { status: 400 } }, 'not an object');
  t.match(await registry.register({ registration: registration(owner.address) }, NOW), { ok: false, error: { status: 400, message: /signature: is required/ } });
});

t.test('payTo checksum rules', async (t) => {
  const checksummed = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';
  t.match(checkPayTo(checksummed), { ok: true, value: checksummed });
  t.match(checkPayTo(checksummed.toLowerCase()), { ok: true, value: checksummed }, 'all lower case: unchecksummed, accepted');
  t.match(checkPayTo(`0x${checksummed.slice(2).toUpperCase()}`), { ok: true, value: checksummed }, 'all upper case: unchecksummed, accepted');
  t.match(checkPayTo('0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'), { ok: false, error: { code: 'invalid_address', message: /checksum/, status: 400 } }, 'mixed case with a wrong checksum');
  t.match(checkContentType('Text/Plain; Charset=UTF-8'), { ok: true, value: 'text/plain; charset=utf-8' });
  t.match(checkContentType('application/vnd.api+json'), { ok: true });
  t.match(checkContentType('application/rss+xml'), { ok: false });
  t.ok(registrationBodyLimit() > (10 * 1024 * 1024 * 4) / 3);
});

t.test('a private upstream address is refused', async (t) => {
  const { registry } = setup(t);
  const slug = 'weather-pro';
  for (const baseUrl of ['https://internal.example/', 'https://sneaky.example/', 'https://10.1.2.3/', 'https://[::1]/', 'https://169.254.169.254/latest/', 'https://nowhere.example/']) {
    await refused(
      t,
      registry,
      slug,
      async () => registry.register(await signed(owner, registration(owner.address, { upstream: { kind: 'url', baseUrl } })), NOW),
      400,
      /does not resolve to a public address/,
      baseUrl,
    );
  }
  const devnet = await registry.register(await signed(owner, registration(owner.address, { upstream: { kind: 'url', baseUrl: 'http://127.0.0.1:8545/' } })), NOW);
  t.match(devnet, { ok: true }, 'the allowlisted devnet address, even over http:');
});

t.test('update, delete, ownership and replay', async (t) => {
  const { registry } = setup(t);
  const slug = 'weather-pro';
  const first = await signed(owner, registration(owner.address));
  t.match(await registry.register(first, NOW), { ok: true });

  await refused(t, registry, slug, () => registry.register(first, NOW + 1000), 400, /nonce already used/, 'the same register message replayed');
  await refused(t, registry, slug, async () => registry.register(await signed(other, registration(other.address)), NOW), 400, /slug weather-pro is taken/, 'taken by another wallet');
  await refused(t, registry, slug, async () => registry.register(await signed(owner, registration(owner.address)), NOW), 400, /taken/, 'taken, even for its owner (use update)');

  // Update by another wallet: payTo is theirs (valid signature) but they do not own the slug.
  await refused(
    t,
    registry,
    slug,
    async () => registry.register(await signed(other, registration(other.address, { action: 'update', name: 'Hijacked' })), NOW),
    403,
    /only the owner of weather-pro may update it/,
    'update by another wallet',
  );
  // Update claiming the owner's payTo but signed by another wallet.
  await refused(
    t,
    registry,
    slug,
    async () => registry.register(await signed(other, registration(owner.address, { action: 'update', name: 'Hijacked' })), NOW),
    403,
    /signature/,
    'update naming the owner, signed by another',
  );
  await refused(
    t,
    registry,
    'nobody-here',
    async () => registry.register(await signed(owner, registration(owner.address, { action: 'update', slug: 'nobody-here' })), NOW),
    404,
    /no merchant nobody-here/,
    'update of an unknown slug',
  );

  const later = NOW + 60_000;
  const update = await signed(
    owner,
    registration(owner.address, {
      action: 'update',
      name: 'Weather Pro 2',
      issuedAt: later / 1000,
      upstream: { kind: 'url', baseUrl: 'https://other.example/v2' },
      routes: [{ route: 'forecast', methods: ['GET'], priceUsd: '0.020000', summary: 'A forecast', description: '', input: '' }],
    }),
  );
  const u = await registry.register(update, later);
  t.match(u, { ok: true, value: { action: 'update' } });
  const m = (await registry.get(slug))!;
  t.equal(m.name, 'Weather Pro 2');
  t.equal(m.createdAt, NOW, 'createdAt kept');
  t.equal(m.updatedAt, later);
  t.same(m.upstream, { kind: 'url', baseUrl: 'https://other.example/v2', secretHeaders: {} }, 'an update replaces everything');
  t.same(
    m.routes.map((r) => r.priceUsd),
    ['0.020000'],
  );
  await refused(t, registry, slug, () => registry.register(update, later + 1000), 400, /nonce already used/, 'the update replayed');

  // Delete: only the owner.
  const del = (account: PrivateKeyAccount, payTo: `0x${string}`) => signed(account, { action: 'delete', slug, payTo, nonce: freshNonce(), issuedAt: later / 1000 });
  await refused(t, registry, slug, async () => registry.register(await del(other, other.address), later), 403, /only the owner/, 'delete by another wallet');
  const d = await del(owner, owner.address);
  t.match(await registry.register(d, later), { ok: true, value: { action: 'delete' } });
  t.equal(await registry.get(slug), undefined, 'gone');
  t.same(await registry.list(), []);
  await refused(t, registry, slug, () => registry.register(d, later), 400, /nonce already used/, 'the delete replayed');
  await refused(t, registry, slug, () => registry.register(first, NOW + 2000), 400, /nonce already used/, 'the original register replayed after the delete cannot resurrect it');
  t.match(await registry.register(await signed(other, registration(other.address)), later), { ok: true }, 'the slug is free for a new owner');
  t.equal((await registry.get(slug))?.owner, other.address);
});

t.test('nonces are pruned once outside the clock window', async (t) => {
  const { registry } = setup(t);
  t.match(await registry.register(await signed(owner, registration(owner.address)), NOW), { ok: true });
  const much = NOW + 3_600_000;
  t.match(await registry.register(await signed(owner, registration(owner.address, { action: 'update', issuedAt: much / 1000 })), much), { ok: true });
  t.equal((await registry.record('weather-pro'))?.nonces.length, 1, 'only the fresh nonce is kept');
});

t.test('concurrent registrations of one slug: exactly one wins', async (t) => {
  const { registry } = setup(t);
  const wallets = Array.from({ length: 8 }, () => privateKeyToAccount(generatePrivateKey()));
  const bodies = await Promise.all(wallets.map((w) => signed(w, registration(w.address))));
  const results = await Promise.all(bodies.map((b) => registry.register(b, NOW)));
  t.equal(results.filter((r) => r.ok).length, 1);
  t.equal(results.filter((r) => !r.ok && r.error.status === 400 && /taken/.test(r.error.message)).length, 7);
});

t.test('file upstreams are stored content-addressed', async (t) => {
  const { registry, filesDir } = setup(t, { limits: { maxFileBytes: 64 } });
  const content = '{"answer":42}\n';
  const base64 = Buffer.from(content).toString('base64');
  const fileUpstream = { kind: 'file' as const, fileName: 'answer.json', contentType: 'application/json', contentBase64: base64 };
  const r = await registry.register(await signed(owner, registration(owner.address, { slug: 'answers', upstream: fileUpstream })), NOW);
  t.match(r, { ok: true });
  const m = (await registry.get('answers'))!;
  const sha = createHash('sha256').update(content).digest('hex');
  t.same(m.upstream, { kind: 'file', sha256: sha, contentType: 'application/json', size: content.length, fileName: 'answer.json' });
  t.equal(readFileSync(join(filesDir, sha), 'utf8'), content, 'on disk under <dir>/<sha256>');
  t.equal(Buffer.from((await registry.readMerchantFile(sha))!).toString('utf8'), content);
  t.equal(await registry.readMerchantFile('0'.repeat(64)), undefined);
  t.equal(await registry.readMerchantFile('../x'), undefined);

  t.match(await registry.register(await signed(other, registration(other.address, { slug: 'answers-too', upstream: { ...fileUpstream, fileName: 'copy.json' } })), NOW), { ok: true });
  t.same(readdirSync(filesDir), [sha], 'equal content is stored once, and no temp file is left');

  const big = Buffer.alloc(65, 1).toString('base64');
  await refused(
    t,
    registry,
    'too-big',
    async () => registry.register(await signed(owner, registration(owner.address, { slug: 'too-big', upstream: { ...fileUpstream, contentBase64: big } })), NOW),
    400,
    /larger than 64 bytes/,
    'over the size limit',
  );
  // A refused upload stores nothing.
  const taken = await signed(other, registration(other.address, { slug: 'answers', upstream: { ...fileUpstream, contentBase64: Buffer.from('other').toString('base64') } }));
  await refused(t, registry, 'answers', () => registry.register(taken, NOW), 400, /taken/, 'upload to a taken slug');
  t.same(readdirSync(filesDir), [sha], 'the refused upload left no file');
});

t.test('built-in merchants', async (t) => {
  const { registry } = setup(t);
  const operator = privateKeyToAccount(generatePrivateKey());
  const builtin: Merchant = {
    slug: 'catjoke',
    name: 'Cat Jokes',
    description: 'Jokes.',
    payTo: operator.address,
    networks: ['eip155:8453'],
    upstream: { kind: 'url', baseUrl: 'https://cats.example/', secretHeaders: {} },
    routes: [{ route: 'joke', methods: ['GET'], priceUsd: '0.001000', summary: 'A joke', description: '', input: '', operationId: 'catjoke-joke' }],
    owner: operator.address,
    createdAt: 1,
    updatedAt: 1,
  };
  t.same(await registry.upsertBuiltin([builtin]), { written: ['catjoke'], unchanged: [], conflicts: [] });
  t.same(await registry.upsertBuiltin([builtin]), { written: [], unchanged: ['catjoke'], conflicts: [] }, 'idempotent');
  t.same(await registry.upsertBuiltin([{ ...builtin, name: 'Cat Jokes 2' }]), { written: ['catjoke'], unchanged: [], conflicts: [] });
  t.ok(registry.isBuiltin('catjoke'));
  await refused(
    t,
    registry,
    'catjoke',
    async () => registry.register(await signed(owner, registration(owner.address, { slug: 'catjoke' })), NOW),
    400,
    /slug catjoke is taken/,
    'a built-in slug is taken',
  );
  await refused(
    t,
    registry,
    'catjoke',
    async () => registry.register(await signed(operator, registration(operator.address, { slug: 'catjoke', action: 'update' })), NOW),
    403,
    /built-in merchant managed by the operator/,
    'a built-in merchant cannot be changed by signature',
  );
  t.match(await registry.register(await signed(owner, registration(owner.address, { slug: 'dogjoke' })), NOW), { ok: true });
  t.same(await registry.upsertBuiltin([{ ...builtin, slug: 'dogjoke' }]), { written: [], unchanged: [], conflicts: ['dogjoke'] }, 'a registered merchant keeps its slug');
  t.equal((await registry.get('dogjoke'))?.owner, owner.address);
  t.ok(await registry.delete('dogjoke'), 'operator removal');
  t.equal(await registry.get('dogjoke'), undefined);
  t.notOk(await registry.delete('dogjoke'));
});

t.test('over real sockets: nothing secret leaves the gateway', async (t) => {
  const logLines: string[] = [];
  const { registry } = setup(t, { log: createLogger('merchants', { level: 'debug', write: (l) => logLines.push(l) }) });
  const server = createHttpServer({ host: '127.0.0.1', port: 0, maxBodyBytes: registrationBodyLimit(registry.limits.maxFileBytes), log: () => {} });
  mountMerchantRoutes(server, { registry, now: () => NOW });
  const port = await server.listen();
  t.teardown(() => server.close());
  const base = `http://127.0.0.1:${port}`;
  const seen: string[] = [];
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    seen.push(text, ...[...res.headers.entries()].map(([k, v]) => `${k}: ${v}`));
    t.match(res.headers.get('content-type'), /^application\/json/, `${method} ${path}: JSON`);
    return { status: res.status, body: JSON.parse(text) as Record<string, unknown> };
  };

  const created = await call('POST', '/api/merchants', await signed(owner, registration(owner.address)));
  t.equal(created.status, 201);
  t.match(created.body, { merchant: { slug: 'weather-pro', upstream: { kind: 'url' }, owner: owner.address } });
  t.same((created.body.merchant as Record<string, unknown>).upstream, { kind: 'url' }, 'only the kind of a URL upstream');

  const file = await call(
    'POST',
    '/api/merchants',
    await signed(other, registration(other.address, { slug: 'files', upstream: { kind: 'file', fileName: 'secret-name.txt', contentType: 'text/plain', contentBase64: 'aGk=' } })),
  );
  t.equal(file.status, 201);
  t.same((file.body.merchant as Record<string, unknown>).upstream, { kind: 'file', sha256: '8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4', contentType: 'text/plain', size: 2 });

  const list = await call('GET', '/api/merchants');
  t.equal(list.status, 200);
  t.same(
    (list.body.merchants as { slug: string }[]).map((m) => m.slug),
    ['files', 'weather-pro'],
  );
  const one = await call('GET', '/api/merchants/weather-pro');
  t.equal(one.status, 200);
  t.equal((one.body.merchant as { name: string }).name, 'Weather Pro');
  t.match(await call('GET', '/api/merchants/nope'), { status: 404, body: { error: /no merchant/ } });

  const later = await signed(owner, registration(owner.address, { action: 'update', name: 'Renamed' }));
  t.match(await call('POST', '/api/merchants', later), { status: 200, body: { merchant: { name: 'Renamed', upstream: { kind: 'url' } } } });
  t.match(await call('POST', '/api/merchants', later), { status: 400, body: { error: /nonce already used/ } });
  t.match(await call('POST', '/api/merchants', await signed(other, registration(other.address, { action: 'update' }))), { status: 403 });
  t.match(await call('POST', '/api/merchants', await signed(other, registration(other.address))), { status: 400, body: { error: /slug weather-pro is taken/ } });
  t.match(await call('POST', '/api/merchants', '{not json'), { status: 400, body: { error: /not JSON/ } });
  t.match(await call('POST', '/api/merchants', ''), { status: 400 });
  t.match(await call('POST', '/api/merchants', { registration: 1, signature: 2 }), { status: 400 });
  t.match(
    await call(
      'POST',
      '/api/merchants',
      await signed(owner, registration(owner.address, { slug: 'bad-header', upstream: { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/`, secretHeaders: { connection: SECRET_VALUE } } })),
    ),
    { status: 400, body: { error: /connection/ } },
  );
  t.match(
    await call(
      'POST',
      '/api/merchants',
      await signed(owner, registration(owner.address, { slug: 'bad-value', upstream: { kind: 'url', baseUrl: `https://${UPSTREAM_HOST}/`, secretHeaders: { 'x-key': `${SECRET_VALUE}\n` } } })),
    ),
    { status: 400 },
  );
  t.match(await call('POST', '/api/merchants', await signed(owner, registration(owner.address, { slug: 'private', upstream: { kind: 'url', baseUrl: 'https://internal.example/' } }))), {
    status: 400,
    body: { error: /public address/ },
  });

  const deleted = await call('POST', '/api/merchants', await signed(owner, { action: 'delete', slug: 'weather-pro', payTo: owner.address, nonce: freshNonce(), issuedAt: NOW_S }));
  t.match(deleted, { status: 200, body: { deleted: 'weather-pro' } });
  t.match(await call('GET', '/api/merchants/weather-pro'), { status: 404 });

  const everything = seen.join('\n');
  t.notOk(everything.includes(SECRET_VALUE), 'no secret header value in any response');
  t.notOk(everything.includes('sk-live'), 'not even part of it');
  t.notOk(everything.toLowerCase().includes(UPSTREAM_HOST), 'no upstream host in any response');
  t.notOk(everything.includes('other.example'), 'nor the updated upstream');
  t.notOk(/authorization/i.test(everything), 'no secret header name');
  t.notOk(everything.includes('secret-name.txt'), 'no uploaded file name');

  const logs = logLines.join('\n');
  t.match(logs, /merchant registered/, 'registrations are logged');
  const refused = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'merchant upstream refused');
  t.match(refused, { detail: /10\.0\.0\.5: private network/ }, 'the operator sees why an upstream was refused');
  t.notOk(logs.includes(SECRET_VALUE) || logs.includes('sk-live'), 'no secret header value in the logs');
});

t.test('configuration from the environment', async (t) => {
  const c = merchantConfigFromEnv({
    GATE402_DATA_DIR: '/data',
    GATE402_UPSTREAM_ALLOWLIST: '127.0.0.1, devnet.local,10.0.0.0/8',
    GATE402_MERCHANT_MAX_FILE_BYTES: '1024',
    GATE402_MERCHANT_MAX_PRICE_USD: '5.000000',
  });
  t.equal(c.filesDir, '/data/merchant-files');
  t.equal(c.limits.maxFileBytes, 1024);
  t.equal(c.limits.maxPriceUsd, '5.000000');
  t.equal(c.limits.minPriceUsd, '0.000001');
  t.ok(c.upstreamAllowlist.allowsAddress('10.9.9.9'));
  t.ok(c.upstreamAllowlist.allowsHost('devnet.local'));
  t.ok(merchantConfigFromEnv({}).upstreamAllowlist.empty, 'nothing allowlisted by default');
  const configError = (env: NodeJS.ProcessEnv): string => {
    try {
      merchantConfigFromEnv(env);
    } catch (e) {
      return e instanceof ConfigError ? e.message : `not a ConfigError: ${String(e)}`;
    }
    return 'no error';
  };
  t.match(configError({ GATE402_UPSTREAM_ALLOWLIST: 'http://x/' }), /^GATE402_UPSTREAM_ALLOWLIST: /);
  t.match(configError({ GATE402_MERCHANT_MAX_PRICE_USD: '5' }), /^GATE402_MERCHANT_MIN_PRICE_USD \/ GATE402_MERCHANT_MAX_PRICE_USD: /);
  t.match(configError({ GATE402_MERCHANT_MAX_FILE_BYTES: '-1' }), /^GATE402_MERCHANT_MAX_FILE_BYTES must be/);
});
