/**
 * The upstream address guard: the forbidden-ranges table, the registration-time URL check (with an injected
 * resolver) and the connect-time check of the undici dispatcher against a real local HTTP server.
 */
import t from 'tap';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { forbiddenAddressReason, isForbiddenAddress } from '../src/gateway/upstream-guard/ip-ranges.ts';
import { cidrContains, parseCidr, parseIp } from '../src/http/ip.ts';
import { UpstreamAddressForbiddenError, UpstreamAllowlist, checkUpstreamUrl, guardedDispatcher, type Resolver } from '../src/gateway/upstream-guard/guard.ts';

const FORBIDDEN = [
  // IPv4
  '0.0.0.0',
  '0.1.2.3',
  '10.0.0.1',
  '10.255.255.255',
  '100.64.0.1',
  '100.100.100.200', // Alibaba metadata, in CGNAT
  '100.127.255.255',
  '127.0.0.1',
  '127.255.255.254',
  '169.254.0.1',
  '169.254.169.254',
  '168.63.129.16',
  '172.16.0.1',
  '172.31.255.255',
  '192.0.0.1',
  '192.0.0.192',
  '192.0.2.10',
  '192.88.99.1',
  '192.168.1.1',
  '198.18.0.1',
  '198.19.255.255',
  '198.51.100.7',
  '203.0.113.200',
  '224.0.0.1',
  '239.255.255.250',
  '240.0.0.1',
  '255.255.255.255',
  '192.175.48.1', // AS112 DNS sink
  '192.52.193.1', // AMT relay anycast
  // IPv6
  '::',
  '::1',
  '[::1]',
  '0:0:0:0:0:0:0:1',
  '::ffff:127.0.0.1',
  '::ffff:7f00:1',
  '::ffff:10.1.2.3',
  '::ffff:169.254.169.254',
  '::127.0.0.1', // IPv4-compatible
  '::8.8.8.8', // IPv4-compatible, deprecated: always forbidden
  '64:ff9b::10.0.0.1', // NAT64 embedding a private address
  '64:ff9b:1::1', // local-use NAT64
  '100::1', // discard-only
  'fc00::1',
  'fd00:ec2::254', // AWS IPv6 metadata
  'fdff:ffff::1',
  'fe80::1',
  'fe80::1%eth0',
  'febf::1',
  'fec0::1',
  'ff02::1',
  'ff05::1:3',
  '2001:db8::1',
  '2001:db8:ffff::1',
  '3fff::1',
  '2001:2::1', // benchmarking
  '2001:10::1', // ORCHID
  '2002:7f00:1::1', // 6to4 of 127.0.0.1
  '2002:a00:1::1', // 6to4 of 10.0.0.1
  '2002:c0a8:101::1', // 6to4 of 192.168.1.1
  '2001:0:7f00:1::1', // Teredo, server 127.0.0.1
  '2001:0:808:808:0:0:f5ff:fffe', // Teredo, client (inverted) 10.0.0.1
  '5f00::1', // segment routing
  '::ffff:0:7f00:1', // IPv4-translated (RFC 6145)
  '2001:4:112::1', // AS112 DNS sink
  '2001:20::1', // ORCHIDv2
  '2001:30::1', // drone remote ID tags
  '[::ffff:169.254.169.254]',
  '::ffff:168.63.129.16', // Azure WireServer, mapped
  '4000::1', // outside 2000::/3
  // not IP addresses at all: fail closed
  '',
  'localhost',
  'example.com',
  '0x7f.0.0.1',
  '2130706433',
  '127.1',
  '1.2.3.4.5',
  '::ffff:1.2.3',
];

const ALLOWED = [
  '1.1.1.1',
  '8.8.8.8',
  '9.255.255.255',
  '11.0.0.0',
  '100.63.255.255',
  '100.128.0.0',
  '169.253.255.255',
  '172.15.255.255',
  '172.32.0.0',
  '192.0.1.1',
  '192.167.255.255',
  '192.169.0.0',
  '198.17.255.255',
  '198.20.0.0',
  '203.0.114.1',
  '223.255.255.255',
  '2606:4700:4700::1111',
  '2001:4860:4860::8888',
  '2a00:1450:4001:82b::200e',
  '::ffff:8.8.8.8',
  '::ffff:0808:0808',
  '64:ff9b::8.8.8.8',
  '2002:808:808::1', // 6to4 of 8.8.8.8
  '2001:0:808:808:0:0:f7f7:f7f7', // Teredo: server 8.8.8.8, client 8.8.8.8
  '2001:200::1', // just past 2001::/23
  '3ffe::1',
];

t.test('forbidden address ranges', async (t) => {
  for (const ip of FORBIDDEN) t.ok(isForbiddenAddress(ip), `${JSON.stringify(ip)} is forbidden (${forbiddenAddressReason(ip) ?? '-'})`);
  for (const ip of ALLOWED) t.notOk(isForbiddenAddress(ip), `${ip} is allowed (${forbiddenAddressReason(ip) ?? '-'})`);
  t.equal(forbiddenAddressReason('::ffff:127.0.0.1'), 'IPv4-mapped loopback');
  t.equal(forbiddenAddressReason('169.254.169.254'), 'cloud metadata service');
  t.equal(forbiddenAddressReason('10.0.0.5'), 'private network');
});

t.test('ip and cidr parsing', async (t) => {
  t.equal(parseIp('1.2.3.4')?.toString(), '1.2.3.4');
  t.equal(parseIp('::ffff:1.2.3.4')?.toNormalizedString(), '0:0:0:0:0:ffff:102:304');
  t.equal(parseIp('1:2:3:4:5:6:7:8')?.toString(), '1:2:3:4:5:6:7:8');
  t.equal(parseIp('1::8')?.toNormalizedString(), '1:0:0:0:0:0:0:8');
  t.equal(parseIp('[::1]')?.toString(), '::1');
  t.equal(parseIp('::8.8.8.8')?.toNormalizedString(), '0:0:0:0:0:0:808:808', 'IPv4-compatible is not read as IPv4-mapped');
  t.equal(parseIp('::ffff:127.0.0.1%eth0')?.toNormalizedString(), '0:0:0:0:0:ffff:7f00:1%eth0');
  for (const legacy of ['1.2.3', '127.1', '0x7f.0.0.1', '2130706433', '017.0.0.1', '1.2.3.4.5', '::ffff:1.2.3', 'localhost', ''])
    t.equal(parseIp(legacy), undefined, `${JSON.stringify(legacy)} is not read as an address`);
  const block = parseCidr('10.1.2.3/8');
  t.ok(block && cidrContains(block, parseIp('10.200.0.1')!) && !cidrContains(block, parseIp('11.0.0.1')!), 'host bits of a block are ignored');
  const single = parseCidr('192.168.1.5');
  t.ok(single && cidrContains(single, parseIp('192.168.1.5')!) && !cidrContains(single, parseIp('192.168.1.6')!), 'an address is a /32');
  t.notOk(block && cidrContains(block, parseIp('::ffff:10.0.0.1')!), 'a block matches its own family only');
  t.equal(parseCidr('10.0.0.0/33'), undefined);
  t.equal(parseCidr('10.0.0.0/x'), undefined);
  t.equal(parseCidr('10.0.0.0/'), undefined);
  t.equal(parseCidr('10.0.0.0/-1'), undefined);
  t.equal(parseCidr('::/129'), undefined);
});

t.test('the allowlist', async (t) => {
  const a = new UpstreamAllowlist(['127.0.0.1', 'Devnet.Local.', '10.1.0.0/16', '::1']);
  t.ok(a.allowsAddress('127.0.0.1'));
  t.ok(a.allowsAddress('::ffff:127.0.0.1'), 'mapped form matches the IPv4 entry');
  t.notOk(a.allowsAddress('127.0.0.2'));
  t.ok(a.allowsAddress('10.1.200.3'));
  t.notOk(a.allowsAddress('10.2.0.1'));
  t.ok(a.allowsAddress('::1'));
  t.ok(a.allowsHost('devnet.local'), 'host names are case-insensitive, trailing dot ignored');
  t.ok(a.allowsHost('[::1]'), 'an IP-literal host is matched as an address');
  t.notOk(a.allowsHost('other.local'));
  t.throws(() => new UpstreamAllowlist(['http://x']), /not a host name/);
  t.throws(() => new UpstreamAllowlist(['10.0.0.0/40']), /not a host name/);
  t.throws(() => new UpstreamAllowlist(['127.0.0.1:99999']), /not a host name/);
  t.throws(() => new UpstreamAllowlist(['127.0.0.1:x']), /not a host name/);
});

t.test('an allowlist entry with a port allows that port only', async (t) => {
  const a = new UpstreamAllowlist(['127.0.0.1:4100', '[::1]:4100', 'fixtures.local:4100']);
  t.ok(a.allowsAddress('127.0.0.1', 4100));
  t.notOk(a.allowsAddress('127.0.0.1', 8545), 'another port of the same address (a chain RPC) is refused');
  t.ok(a.allowsAddress('::ffff:127.0.0.1', 4100));
  t.ok(a.allowsAddress('::1', 4100));
  t.notOk(a.allowsAddress('::1', 4101));
  t.ok(a.allowsHost('fixtures.local', 4100));
  t.notOk(a.allowsHost('fixtures.local', 80));
  t.ok(a.allowsHost('127.0.0.1', undefined), 'an unknown port (a DNS lookup) is left to the connect-time check');
  const check = (url: string) => checkUpstreamUrl(url, { allowlist: a, resolve: async () => ['127.0.0.1'] });
  t.match(await check('http://127.0.0.1:4100/x'), { ok: true });
  t.match(await check('http://127.0.0.1:8545/'), { ok: false, error: { code: 'forbidden_address' } });
  t.match(await check('http://127.0.0.1/'), { ok: false, error: { code: 'forbidden_address' } }, 'the default port is a port too');
  t.match(await check('http://fixtures.local:4100/'), { ok: true });
  t.match(await check('http://fixtures.local:4101/'), { ok: false, error: { code: 'forbidden_address' } });

  // At request time: the guarded dispatcher refuses another port of an allowlisted address before connecting.
  const served = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((r) => served.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => served.close(() => r())));
  const port = (served.address() as { port: number }).port;
  const allowedHere = guardedDispatcher([`127.0.0.1:${port}`]);
  const elsewhere = guardedDispatcher([`127.0.0.1:${port + 1}`]);
  t.teardown(async () => {
    await allowedHere.close();
    await elsewhere.close();
  });
  t.equal((await request(`http://127.0.0.1:${port}/`, { dispatcher: allowedHere })).statusCode, 200, 'the allowlisted port');
  await t.rejects(request(`http://127.0.0.1:${port}/`, { dispatcher: elsewhere }), /forbidden/, 'another port of the same address');
  const byName = guardedDispatcher([`localhost:${port + 1}`]);
  t.teardown(() => byName.close());
  await t.rejects(request(`http://localhost:${port}/`, { dispatcher: byName }), /forbidden/, 'a name allowlisted on another port');
});

function fakeDns(table: Record<string, string[]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const fn = async (host: string): Promise<string[]> => {
    calls.push(host);
    const a = table[host];
    if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return a;
  };
  return Object.assign(fn, { calls });
}

t.test('checkUpstreamUrl', async (t) => {
  const resolve = fakeDns({
    'api.example.com': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
    'internal.example.com': ['10.0.0.5'],
    'mixed.example.com': ['93.184.216.34', '127.0.0.1'],
    'empty.example.com': [],
    'devnet.local': ['127.0.0.1'],
  });
  const ok = await checkUpstreamUrl('https://api.example.com/v1', { allowlist: [], resolve });
  t.ok(ok.ok, 'a public name is accepted');
  if (ok.ok) t.same(ok.value.addresses, ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946']);

  const priv = await checkUpstreamUrl('https://internal.example.com/', { allowlist: [], resolve });
  t.match(priv, { ok: false, error: { code: 'forbidden_address' } }, 'a name resolving to 10.0.0.5 is refused');
  if (!priv.ok) {
    t.notMatch(priv.error.message, /10\.0\.0\.5/, 'the merchant-facing error does not reveal the resolved address');
    t.match(priv.error.detail, /10\.0\.0\.5: private network/, 'the operator detail does');
  }
  t.match(await checkUpstreamUrl('https://mixed.example.com/', { allowlist: [], resolve }), { ok: false, error: { code: 'forbidden_address' } }, 'one bad answer is enough');
  t.match(await checkUpstreamUrl('https://empty.example.com/', { allowlist: [], resolve }), { ok: false, error: { code: 'unresolvable' } });
  t.match(await checkUpstreamUrl('https://nowhere.example.com/', { allowlist: [], resolve }), { ok: false, error: { code: 'unresolvable' } });
  t.match(await checkUpstreamUrl('http://127.0.0.1:8545/', { allowlist: [], resolve }), { ok: false, error: { code: 'forbidden_address' } });
  t.match(await checkUpstreamUrl('http://[::ffff:127.0.0.1]/', { allowlist: [], resolve }), { ok: false, error: { code: 'forbidden_address' } });
  t.match(await checkUpstreamUrl('http://0x7f.1/', { allowlist: [], resolve }), { ok: false, error: { code: 'forbidden_address' } }, 'URL parsing normalises legacy IPv4 spellings');
  t.match(await checkUpstreamUrl('http://[fe80::1]/', { allowlist: [], resolve }), { ok: false, error: { code: 'forbidden_address' } });

  const allowed = await checkUpstreamUrl('http://127.0.0.1:8545/', { allowlist: ['127.0.0.1'], resolve });
  t.ok(allowed.ok, 'an allowlisted 127.0.0.1 is accepted');
  t.ok((await checkUpstreamUrl('http://devnet.local/', { allowlist: ['127.0.0.1'], resolve })).ok, 'a name resolving to an allowlisted address');
  t.ok((await checkUpstreamUrl('http://devnet.local/', { allowlist: ['devnet.local'], resolve })).ok, 'an allowlisted host name');
  t.ok((await checkUpstreamUrl('http://internal.example.com/', { allowlist: ['10.0.0.0/8'], resolve })).ok, 'an allowlisted CIDR');

  t.match(await checkUpstreamUrl('ftp://api.example.com/', { allowlist: [], resolve }), { ok: false, error: { code: 'unsupported_scheme' } });
  t.match(await checkUpstreamUrl('not a url', { allowlist: [], resolve }), { ok: false, error: { code: 'invalid_url' } });
  const slow: Resolver = () => new Promise(() => {});
  t.match(await checkUpstreamUrl('https://slow.example.com/', { allowlist: [], resolve: slow, resolveTimeoutMs: 50 }), { ok: false, error: { code: 'unresolvable' } });
});

async function startLocalServer(t: { teardown(fn: () => unknown): void }): Promise<{ port: number; hits: () => number }> {
  let hits = 0;
  const server: Server = createServer((_req, res) => {
    hits++;
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('hello from upstream');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as AddressInfo).port, hits: () => hits };
}

t.test('the dispatcher checks the address at connect time', async (t) => {
  const { port, hits } = await startLocalServer(t);

  const refusing = guardedDispatcher([], { connectTimeoutMs: 2000 });
  t.teardown(() => refusing.close());
  await t.rejects(request(`http://127.0.0.1:${port}/`, { dispatcher: refusing }), UpstreamAddressForbiddenError, 'an IP literal is refused');
  await t.rejects(request(`http://localhost:${port}/`, { dispatcher: refusing }), { code: 'GATE402_UPSTREAM_ADDRESS_FORBIDDEN' }, 'a name resolving to loopback is refused');
  t.equal(hits(), 0, 'the server never saw a request');

  // DNS rebinding: a name that passed registration as public now answers 127.0.0.1.
  let answer = '93.184.216.34';
  const rebinding: Resolver = async () => [answer];
  t.ok((await checkUpstreamUrl(`http://rebind.example.com:${port}/`, { allowlist: [], resolve: rebinding })).ok, 'registration-time check passes');
  answer = '127.0.0.1';
  const guarded = guardedDispatcher([], { resolve: rebinding });
  t.teardown(() => guarded.close());
  await t.rejects(request(`http://rebind.example.com:${port}/`, { dispatcher: guarded }), /address 127\.0\.0\.1 is forbidden \(loopback\)/, 'the connect-time check catches the rebind');
  t.equal(hits(), 0);

  const allowing = guardedDispatcher(['127.0.0.1']);
  t.teardown(() => allowing.close());
  const res = await request(`http://127.0.0.1:${port}/`, { dispatcher: allowing });
  t.equal(res.statusCode, 200);
  t.equal(await res.body.text(), 'hello from upstream');
  const allowingByName = guardedDispatcher(['127.0.0.1'], { resolve: rebinding });
  t.teardown(() => allowingByName.close());
  const viaName = await request(`http://rebind.example.com:${port}/x`, { dispatcher: allowingByName });
  t.equal(viaName.statusCode, 200, 'an allowlisted address reached through a name');
  await viaName.body.text();
  t.equal(hits(), 2);
});

t.test('the dispatcher applies its headers timeout', async (t) => {
  const server = createServer(() => {
    /* never answers */
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const port = (server.address() as AddressInfo).port;
  const d = guardedDispatcher(['127.0.0.1'], { headersTimeoutMs: 100 });
  t.teardown(() => d.destroy());
  await t.rejects(request(`http://127.0.0.1:${port}/`, { dispatcher: d }), { code: 'UND_ERR_HEADERS_TIMEOUT' });
});

t.test('the dispatcher caps response bodies when asked', async (t) => {
  const { port } = await startLocalServer(t);
  const d = guardedDispatcher(['127.0.0.1'], { maxResponseBytes: 4 });
  t.teardown(() => d.close());
  await t.rejects(
    async () => {
      const res = await request(`http://127.0.0.1:${port}/`, { dispatcher: d });
      await res.body.text();
    },
    { code: 'UND_ERR_RES_EXCEEDED_MAX_SIZE' },
  );
});
