/**
 * Fuzz: thousands of generated requests at the real gateway (paid routes, stock API, gas sponsor, merchant
 * registration, discovery) and the real facilitator (/verify, /settle, /supported), over raw sockets (bytes fetch
 * cannot send) and fetch: hostile paths and escapes, broken framing and headers, and mutations of VALID credentials
 * made by the official clients (@x402/fetch + @x402/evm for EIP-3009 and Permit2, mppx for MPP; sent unmodified only
 * on terms they were not made for). Afterwards, what a victim checks: no answer >= 500 from gate402's own code, both
 * processes alive, not one relayer transaction on any chain, not one upstream call, every payer's balance as it was.
 *
 * Seeded: the seed is printed; `GATE402_FUZZ_SEED=<seed>` replays a run, `GATE402_FUZZ_CASES=12,345` sends only those
 * cases of it.
 */
import t from 'tap';
import { Agent, fetch as undiciFetch } from 'undici';
import { x402Client } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { Mppx, evm } from 'mppx/client';
import { parseEther, parseUnits, toHex, type Address, type LocalAccount } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2, EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS, SUPPORTED_NETWORKS } from '../../src/chain/canonical.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';
import { clientsFor, freshAccount, network, tester, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { garbageToken, mutateBound, type Json, type JsonPath } from '../helpers/fuzz-mutate.ts';
import { createRng, fuzzSeed, type Rng } from '../helpers/fuzz-random.ts';
import { fundedPayer, officialPayment, requirementsFor, stableBalance } from '../helpers/payments.ts';
import { rawExchange } from '../helpers/raw-http.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';

/**
 * Families that send a valid credential unmodified on terms it was not made for (another source, another stock buy):
 * sent first, while the credentials (and the stock quote they carry) are fresh, so that each is refused for its terms.
 */
const FRESH_FIRST = new Set(['mpp-source', 'stock-terms', 'facilitator-zero-self']);
const onlyCases = process.env.GATE402_FUZZ_CASES?.split(',')
  .map((s) => Number(s.trim()))
  .filter((n) => Number.isInteger(n));

const TOTAL_CASES = 5400;
const CONCURRENCY = 24;
const RAW_CONCURRENCY = 96;
const ANSWER_TIMEOUT_MS = 20_000;

const seed = fuzzSeed();
t.comment(`fuzz seed ${seed} (replay with GATE402_FUZZ_SEED=${seed})`);

const manifest = testDevnet();
const funder = tester('fuzz');
const nets = Object.fromEntries(SUPPORTED_NETWORKS.map((c) => [c, network(manifest, c)])) as Record<string, NetworkEntry>;
const stockNet = nets[CAIP2.stockChain] as NetworkEntry;
const baseNet = nets[CAIP2.base] as NetworkEntry;

/** Fresh keys for the services spawned here, given gas on every chain (test devnet only). */
async function gassed(count: number): Promise<`0x${string}`[]> {
  const keys = Array.from({ length: count }, () => generatePrivateKey());
  await Promise.all(keys.flatMap((k) => Object.values(nets).map((n) => rpcCall(n.rpcUrl, 'anvil_setBalance', [privateKeyToAccount(k).address, toHex(parseEther('10'))]))));
  return keys;
}

const [gatewayRelayers, facilitatorRelayers, [deskKey]] = await Promise.all([gassed(2), gassed(2), gassed(1)]);
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());
const [gw, fac] = await Promise.all([
  spawnFacilitator({
    part: 'gateway',
    manifestPath: TEST_MANIFEST_PATH,
    env: {
      GATE402_RELAYER_KEYS: gatewayRelayers.join(','),
      GATE402_CATALOG_UPSTREAM_BASE: new URL(fixtures.baseUrlFor('catjoke')).origin,
      GATE402_STOCK_ENABLED: 'true',
      GATE402_STOCK_DESK_KEY: deskKey as string,
      GATE402_SPONSOR_RATE_CAPACITY: '100000',
    },
  }),
  spawnFacilitator({
    manifestPath: TEST_MANIFEST_PATH,
    env: { GATE402_RELAYER_KEYS: facilitatorRelayers.join(','), GATE402_FACILITATOR_RATE_CAPACITY: '100000', GATE402_FACILITATOR_RATE_PER_SECOND: '100000' },
  }),
]);
t.teardown(() => Promise.all([gw.stop(), fac.stop()]));

// Payers, funded so that a forged payment slipping through would move real money (and be seen).
// One at a time on each chain: the funder's nonces must not collide.
const [payerBase, payerSepolia, [payerStock, payerMpp]] = await Promise.all([
  fundedPayer(baseNet, CAIP2.base, funder, parseUnits('5', 6)),
  fundedPayer(nets[CAIP2.baseSepolia] as NetworkEntry, CAIP2.baseSepolia, funder, parseUnits('5', 6)),
  (async () =>
    [await fundedPayer(stockNet, CAIP2.stockChain, funder, parseUnits('5', 6)), await fundedPayer(stockNet, CAIP2.stockChain, funder, parseUnits('5', 6), { approvePermit2: false })] as const)(),
]);
const zeroSelfPayer = freshAccount();
const facilitatorPayTo = freshAccount().address;

type Capture = { 'payment-signature'?: string; authorization?: string };

/** A fetch that lets the official client's first request through and keeps its paid retry instead of sending it. */
function capturing(into: Capture[]): typeof fetch {
  return async (input, init) => {
    const req = new Request(input as Parameters<typeof fetch>[0], init);
    const ps = req.headers.get('payment-signature');
    const auth = req.headers.get('authorization');
    if (ps !== null || (auth !== null && /^payment\s/i.test(auth))) {
      into.push({ ...(ps !== null ? { 'payment-signature': ps } : {}), ...(auth !== null ? { authorization: auth } : {}) });
      return new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } });
    }
    return fetch(req);
  };
}

async function x402Credential(payer: LocalAccount, caip2: string, url: string, init?: RequestInit): Promise<string> {
  const into: Capture[] = [];
  const client = registerExactEvmScheme(
    x402Client.fromConfig({ schemes: [], spendControls: false, paymentRequirementsSelector: (_v, offers) => offers.find((o) => o.network === caip2) ?? (offers[0] as (typeof offers)[number]) }),
    { signer: payer },
  );
  await wrapFetchWithPayment(capturing(into), client)(url, init);
  const header = into[0]?.['payment-signature'];
  if (!header) throw new Error(`the official x402 client made no credential for ${url}`);
  return header;
}

async function mppCredential(payer: LocalAccount, url: string): Promise<string> {
  const into: Capture[] = [];
  const mppx = Mppx.create({ methods: [evm({ account: payer, authorization: { name: stockNet.stablecoin.name, version: stockNet.stablecoin.version } })], polyfill: false, fetch: capturing(into) });
  await mppx.fetch(url);
  const header = into[0]?.authorization;
  if (!header) throw new Error(`mppx made no credential for ${url}`);
  return header;
}

const paidPath = '/m/catjoke/joke';
const paidQuery = 'params%5Btopic%5D=naps&lang=en';
const stockSymbol = stockNet.stocks?.[0]?.symbol ?? 'TSLA';
const stockBuyPath = `/api/stock/buy?symbol=${stockSymbol}&stable_amount=1&recipient=${payerStock.address}`;
const credentials = {
  eip3009: await x402Credential(payerBase, CAIP2.base, `${gw.url}${paidPath}?${paidQuery}`),
  permit2: await x402Credential(payerStock, CAIP2.stockChain, `${gw.url}${paidPath}?${paidQuery}`),
  mpp: await mppCredential(payerMpp, `${gw.url}${paidPath}?${paidQuery}`),
  stock: await x402Credential(payerStock, CAIP2.stockChain, `${gw.url}${stockBuyPath}`, { method: 'POST' }),
};
const merchantPayTo = (JSON.parse(Buffer.from(credentials.eip3009, 'base64').toString('utf8')) as { accepted: { payTo: Address } }).accepted.payTo;

/** Valid facilitator bodies, one per network, made by the official @x402/evm client. */
const facilitatorBodies = await Promise.all(
  (
    [
      [CAIP2.base, payerBase],
      [CAIP2.baseSepolia, payerSepolia],
      [CAIP2.stockChain, payerStock],
    ] as const
  ).map(async ([caip2, payer]) => {
    const req = requirementsFor(caip2, nets[caip2] as NetworkEntry, facilitatorPayTo, '10000');
    return { caip2, body: { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req } as unknown as Json };
  }),
);
const zeroSelfBody = await (async () => {
  const req = requirementsFor(CAIP2.base, baseNet, zeroSelfPayer.address, '0');
  return { x402Version: 2, paymentPayload: await officialPayment(zeroSelfPayer, req), paymentRequirements: req } as unknown as Json;
})();

/** Addresses a forger would put in: relayers, the payers, the merchant, contracts, zero. */
const substitutes: string[] = [
  ...[...gatewayRelayers, ...facilitatorRelayers, deskKey as string].map((k) => privateKeyToAccount(k as `0x${string}`).address),
  payerBase.address,
  payerStock.address,
  merchantPayTo,
  facilitatorPayTo,
  PERMIT2_ADDRESS,
  EXACT_PERMIT2_PROXY_ADDRESS,
  stockNet.stablecoin.address,
  baseNet.stablecoin.address,
  '0x0000000000000000000000000000000000000000',
];

// ---------------------------------------------------------------------------------------------------------------
// What the victims check, before.

/** Every address whose nonce says whether a service sent a transaction: relayers and the stock desk, on every chain. */
const senders = [...gatewayRelayers, ...facilitatorRelayers, deskKey as string].map((k) => privateKeyToAccount(k as `0x${string}`).address);
async function senderNonces(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  await Promise.all(
    Object.entries(nets).flatMap(([caip2, n]) => senders.map(async (a) => (out[`${caip2} ${a}`] = await clientsFor(n, funder).pub.getTransactionCount({ address: a, blockTag: 'pending' })))),
  );
  return out;
}
const watchedBalances: Array<[string, Address]> = [
  [CAIP2.base, payerBase.address],
  [CAIP2.baseSepolia, payerSepolia.address],
  [CAIP2.stockChain, payerStock.address],
  [CAIP2.stockChain, payerMpp.address],
  [CAIP2.base, facilitatorPayTo],
  [CAIP2.baseSepolia, facilitatorPayTo],
  [CAIP2.stockChain, facilitatorPayTo],
  ...SUPPORTED_NETWORKS.map((c): [string, Address] => [c, merchantPayTo]),
];
async function balances(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  await Promise.all(watchedBalances.map(async ([c, a]) => (out[`${c} ${a}`] = (await stableBalance(nets[c] as NetworkEntry, a)).toString())));
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// The cases.

type Target = 'gateway' | 'facilitator';
interface RawCase {
  kind: 'raw';
  bytes: Buffer;
  bodyless: boolean;
}
interface FetchCase {
  kind: 'fetch';
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer | string;
}
type CaseBody = (RawCase | FetchCase) & { family: string; target: Target; what: string };
type FuzzCase = CaseBody & { id: number };

const L = (s: string) => Buffer.from(s, 'latin1');
/** UTF-8 bytes as a latin1 string, so they go on the wire as they are. */
const U = (s: string) => Buffer.from(s, 'utf8').toString('latin1');

const PREFIXES = [
  '/m/catjoke/joke',
  '/m/catjoke/joke/',
  '/m/catjoke/',
  '/m/fx/latest/',
  '/m/llm-chat/chat/',
  '/m/',
  '/m/catjoke/openapi.json',
  '/api/merchants/',
  '/api/stock/order/',
  '/api/stock/quote',
  '/api/stock/orders',
  '/api/stock/buy',
  '/api/gas/sponsor',
  '/assets/',
  '/.well-known/x402',
  '/openapi.json',
  '/health',
  '/metrics',
  '/',
  '/verify',
  '/settle',
  '/supported',
];
const SEGMENTS = [
  '..',
  '.',
  '%2e%2e',
  '%2E%2e',
  '%2e%2E',
  '.%2e',
  '%2e.',
  '%2e',
  '%252e%252e',
  '..%2f',
  '%2f',
  '%2F',
  '%5c',
  '%5C',
  '\\',
  '..\\',
  '..%5c',
  '%00',
  '%0a',
  '%0d%0a',
  '%09',
  '%20',
  '%7f',
  '%ff',
  '%fe%ff',
  '%c0%ae%c0%ae',
  '%c0%af',
  '%e0%80%af',
  '%ed%a0%80',
  '%f4%90%80%80',
  '%80',
  '%',
  '%%',
  '%g0',
  '%2',
  '%zz',
  '%u002e',
  '%%32%65',
  '\x80',
  '\xff',
  '\xc0\xae',
  '\xed\xa0\x80',
  '\x01',
  '\x7f',
  '\x00',
  '\t',
  '\x1b[31m',
  ';',
  ';jsessionid=1',
  '//',
  '~',
  '@',
  ':',
  '*',
  '$',
  "'",
  '"',
  '<script>',
  'a'.repeat(300),
  'x'.repeat(9000),
  'joke',
  'catjoke',
  'fx',
  'latest',
  U('é'),
  U('\u202e'),
  U('\ud83d\ude00'),
  '%e2%80%ae',
  'openapi.json',
  '..;',
  '.git',
  'etc',
  'passwd',
  `0x${'1'.repeat(64)}`,
];
const QUERIES = [
  '',
  '?',
  '?a=%',
  '?a=%ff',
  '?%ff=1',
  '?a=\xff',
  '?params%5Btopic%5D=%ff',
  '?params%5Btopic%5D=naps&lang=en',
  '?symbol=TSLA&stable_amount=1',
  '?symbol=%00',
  '?stable_amount=1e400',
  '?stable_amount=-0',
  '?recipient=0x',
  '?limit=%',
  `?payer=0x${'f'.repeat(40)}`,
  '?fixture_status=500',
  '?fixture_delay_ms=1',
  '?&&&==',
  `?a=${'b'.repeat(20_000)}`,
  '?#frag',
  '?a=1#',
  '?\x01=\x02',
  `?${U('ü=ö')}`,
  '?a[b][c][d]=1',
  '?__proto__[x]=1',
  '?constructor=1',
];
const METHODS = ['GET', 'GET', 'GET', 'HEAD', 'POST', 'POST', 'DELETE', 'PUT', 'PATCH', 'OPTIONS', 'TRACE', 'CONNECT', 'get', 'X'.repeat(60), 'G\x00T', 'PRI'];

function rawRequest(method: string, target: string, headerLines: string[], body?: Buffer, version = 'HTTP/1.1'): Buffer {
  const head = `${method} ${target} ${version}\r\nHost: 127.0.0.1\r\nConnection: close\r\n${headerLines.map((h) => `${h}\r\n`).join('')}\r\n`;
  return body ? Buffer.concat([L(head), body]) : L(head);
}

function randomPath(rng: Rng, prefixes = PREFIXES): string {
  const segs = Array.from({ length: rng.between(0, 4) }, () => rng.pick(SEGMENTS));
  let p = rng.pick(prefixes) + segs.join(rng.chance(0.8) ? '/' : rng.pick(['//', '\\', '%2f']));
  if (rng.chance(0.1)) p = p.replace(/\//g, rng.pick(['\\', '%2f', '//']));
  return p + rng.pick(QUERIES);
}

function randomJson(rng: Rng, depth = 0): Json {
  const r = rng.int(depth > 3 ? 6 : 9);
  if (r === 0) return null;
  if (r === 1) return rng.chance(0.5);
  if (r === 2) return rng.pick([0, -1, 1e308, 2 ** 53 + 1, 0.1, -0]);
  if (r === 3) return rng.pick(['', '0x', `0x${rng.hex(40)}`, rng.hex(64), '\u0000', U('é'), 'a'.repeat(rng.pick([10, 1000])), '1000000', '-1']);
  if (r === 4) return `0x${rng.hex(rng.pick([40, 64, 130]))}`;
  if (r === 5) return String(rng.int(1e9));
  if (r === 6) return Array.from({ length: rng.between(0, 4) }, () => randomJson(rng, depth + 1));
  const keys = [
    'x402Version',
    'paymentPayload',
    'paymentRequirements',
    'accepted',
    'payload',
    'address',
    'registration',
    'signature',
    'symbol',
    'amount',
    '__proto__',
    'constructor',
    'slug',
    'routes',
  ];
  return Object.fromEntries(Array.from({ length: rng.between(0, 5) }, () => [rng.pick(keys), randomJson(rng, depth + 1)]));
}

/** A hostile body: random JSON, deep nesting, invalid UTF-8, a BOM, or big. */
function hostileBody(rng: Rng): { body: Buffer; what: string } {
  const r = rng.int(10);
  if (r < 5) return { body: Buffer.from(JSON.stringify(randomJson(rng))), what: 'random JSON' };
  if (r === 5) return { body: L('['.repeat(rng.pick([1000, 100_000])) + ']'.repeat(rng.pick([0, 1000]))), what: 'deep nesting' };
  if (r === 6) return { body: Buffer.concat([L('{"address":"'), rng.bytes(rng.between(1, 40)), L('"}')]), what: 'invalid UTF-8' };
  if (r === 7) return { body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"x402Version":2}')]), what: 'BOM' };
  if (r === 8) return { body: Buffer.from(JSON.stringify({ pad: 'a'.repeat(rng.pick([70_000, 1_100_000])) })), what: 'big' };
  return { body: rng.bytes(rng.between(0, 2000)), what: 'random bytes' };
}

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'APPLICATION/JSON',
  'text/plain',
  'application/json; charset=latin1',
  'application/jsonx',
  'multipart/form-data; boundary=x',
  '',
];

function pathCase(rng: Rng, target: Target): CaseBody {
  const method = rng.pick(METHODS);
  const path = randomPath(rng);
  const version = rng.chance(0.05) ? rng.pick(['HTTP/1.0', 'HTTP/2.0', 'HTTP/1.1x', 'HTTP/9', '']) : 'HTTP/1.1';
  const target2 = rng.chance(0.04) ? rng.pick(['*', `http://evil.example${path}`, path.slice(1), '']) : path;
  const body = method.toUpperCase() === 'POST' || method === 'PUT' ? Buffer.from(JSON.stringify(randomJson(rng))) : undefined;
  const headers = body ? [`Content-Length: ${body.length}`, 'Content-Type: application/json'] : [];
  const family = target === 'gateway' && badPaidRouteName(target2) ? 'paywall-escapes' : 'path';
  return {
    kind: 'raw',
    family,
    target,
    bytes: rawRequest(method, target2, headers, body, version),
    bodyless: method === 'HEAD',
    what: `${JSON.stringify(method)} ${JSON.stringify(target2.slice(0, 160))} ${version}`,
  };
}

/** `/m/{slug}/{route}...` whose route name is no valid percent-encoded UTF-8 (the paywall decodes it). */
function badPaidRouteName(target: string): boolean {
  const parts = (target.split('?')[0] as string).split('/');
  if (parts[1] !== 'm' || parts.length < 4) return false;
  try {
    decodeURIComponent(Buffer.from(parts[2] as string, 'latin1').toString('utf8'));
  } catch {
    return false; // a bad slug: the router answers 400 before the paywall
  }
  try {
    decodeURIComponent(Buffer.from(parts[3] as string, 'latin1').toString('utf8'));
    return false;
  } catch {
    return true;
  }
}

const HOSTILE_HEADERS: Array<(rng: Rng) => [string[], Buffer | undefined]> = [
  () => [['Content-Length: 5', 'Content-Length: 6'], L('{"a":1')],
  (rng) => [[`Content-Length: ${rng.pick(['abc', '-1', '99999999999999999999', ' 5 ', '0x10', '5, 5', '+5', '1e3'])}`], L('{"a":')],
  () => [['Transfer-Encoding: chunked', 'Content-Length: 5'], L('0\r\n\r\nGET /m/catjoke/joke HTTP/1.1\r\nHost: x\r\n\r\n')],
  (rng) => [[`Transfer-Encoding: ${rng.pick(['gzip, chunked', 'xchunked', 'chunked, identity', 'identity', ' chunked', 'CHUNKED'])}`], L('0\r\n\r\n')],
  () => [['Transfer-Encoding : chunked'], L('0\r\n\r\n')],
  () => [['X-Folded: a', ' continued'], undefined],
  () => [['NoColonHere'], undefined],
  () => [['Bad Name: x'], undefined],
  () => [['X-Nul: a\x00b'], undefined],
  () => [['X-High: \xff\xfe\x80'], undefined],
  (rng) => [[`X-Big: ${'a'.repeat(rng.pick([8000, 20_000, 200_000]))}`], undefined],
  () => [Array.from({ length: 300 }, (_, i) => `X-H${i}: ${i}`), undefined],
  () => [['Host: evil.example', 'Host: other.example'], undefined],
  () => [[`Host: ${'\xff'.repeat(20)}`], undefined],
  (rng) => [[`X-Forwarded-For: ${rng.pick(['garbage', '1.2.3.4, ::1, ;;', '999.999.999.999', '\xff', ', , ,', 'a'.repeat(5000), '::ffff:127.0.0.1', '[::1]:80'])}`], undefined],
  () => [['Expect: 100-continue', 'Content-Length: 2', 'Content-Type: application/json'], L('{}')],
  () => [['Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version: 13'], undefined],
  (rng) => [
    [
      `Payment-Signature: ${rng
        .bytes(rng.between(1, 200))
        .toString('latin1')
        .replace(/[\r\n]/g, '')}`,
    ],
    undefined,
  ],
  (rng) => [
    [
      `Authorization: Payment ${rng
        .bytes(rng.between(1, 200))
        .toString('latin1')
        .replace(/[\r\n]/g, '')}`,
    ],
    undefined,
  ],
  () => [['Authorization: Payment', 'Authorization: Payment x'], undefined],
  () => [['Payment-Signature: a', 'Payment-Signature: b', 'X-Payment: c'], undefined],
  () => [['Content-Type: application/json; charset=\xff', 'Content-Length: 2'], L('{}')],
  (rng) => [[`Cookie: ${'c=1; '.repeat(rng.pick([10, 3000]))}`], undefined],
  () => [['Range: bytes=0-1,2-3,4-5', 'If-None-Match: *', 'Accept-Encoding: gzip;q=\xff'], undefined],
];

function headerCase(rng: Rng, target: Target): CaseBody {
  const pick = rng.int(HOSTILE_HEADERS.length);
  const [headers, body] = (HOSTILE_HEADERS[pick] as (rng: Rng) => [string[], Buffer | undefined])(rng);
  const method = body ? 'POST' : rng.pick(['GET', 'HEAD', 'POST']);
  const path =
    target === 'facilitator'
      ? rng.pick(['/verify', '/settle', '/supported', '/health'])
      : rng.pick(['/m/catjoke/joke', '/m/llm-chat/chat', '/api/merchants', '/api/stock/buy', '/api/gas/sponsor', '/openapi.json', '/api/stock/quote?symbol=TSLA&stable_amount=1']);
  const framing = body && !headers.some((h) => /^(content-length|transfer-encoding)/i.test(h)) ? [`Content-Length: ${body.length}`] : [];
  return {
    kind: 'raw',
    family: 'headers',
    target,
    bytes: rawRequest(method, path, [...headers, ...framing], body),
    bodyless: method === 'HEAD',
    what: `${method} ${path} header set #${pick}: ${JSON.stringify(headers.join(' | ').slice(0, 120))}`,
  };
}

function chunked(rng: Rng, payload: Buffer, honest: boolean): Buffer {
  const parts: Buffer[] = [];
  let i = 0;
  while (i < payload.length) {
    const n = Math.min(payload.length - i, rng.between(1, 64));
    const chunk = payload.subarray(i, i + n);
    // A dishonest size counts characters, not bytes, as a careless client would: smaller than what follows.
    const size = honest ? n : Math.max(1, Buffer.from(chunk.toString('latin1'), 'latin1').toString('utf8').length - 1);
    parts.push(L(`${size.toString(16)}${rng.chance(0.1) ? ';ext=1' : ''}\r\n`), chunk, L('\r\n'));
    i += n;
  }
  parts.push(L('0\r\n\r\n'));
  return Buffer.concat(parts);
}

function chunkedCase(rng: Rng, target: Target): CaseBody {
  // GET/HEAD/DELETE with a chunked body of non-ASCII bytes: uWebSockets.js's own quirk, counted apart.
  const bodyless = rng.chance(0.3);
  const method = bodyless ? rng.pick(['GET', 'HEAD', 'DELETE']) : 'POST';
  const path =
    target === 'facilitator'
      ? rng.pick(['/verify', '/settle', '/supported'])
      : rng.pick(
          bodyless ? ['/m/catjoke/joke', '/openapi.json', '/api/stock/list', '/health'] : ['/m/llm-chat/chat', '/api/merchants', '/api/gas/sponsor', '/api/stock/buy?symbol=TSLA&stable_amount=1'],
        );
  const payload = rng.chance(0.5) ? Buffer.concat([L('{"a":"'), Buffer.from(U('ééé€€😀')), rng.bytes(rng.between(1, 100)), L('"}')]) : Buffer.from(JSON.stringify(randomJson(rng)));
  const honest = rng.chance(0.7);
  const body = rng.chance(0.1)
    ? L(rng.pick(['zz\r\nabc\r\n0\r\n\r\n', 'ffffffffffffffffff\r\nabc\r\n0\r\n\r\n', '-1\r\n\r\n0\r\n\r\n', '3\r\nabcdef\r\n0\r\n\r\n', '0\r\n\r\n']))
    : chunked(rng, payload, honest);
  return {
    kind: 'raw',
    family: bodyless ? 'chunked-bodyless-method' : 'chunked',
    target,
    bytes: rawRequest(method, path, ['Transfer-Encoding: chunked', 'Content-Type: application/json'], body),
    bodyless: method === 'HEAD',
    what: `${method} ${path} chunked (${honest ? 'honest' : 'miscounted'} sizes) ${JSON.stringify(body.toString('latin1').slice(0, 60))}`,
  };
}

const b64 = (s: string) => Buffer.from(s, 'latin1').toString('base64');
const b64url = (s: string) => Buffer.from(s, 'latin1').toString('base64url');
const decodeToken = (token: string) => JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as Json;
const mppToken = credentials.mpp.replace(/^Payment\s+/i, '');
const X402_BOUND = (p: JsonPath) => p[0] === 'payload' || p[0] === 'accepted' || p[0] === 'x402Version';
const MPP_BOUND = (p: JsonPath) => p[0] === 'payload' || (p[0] === 'challenge' && ['id', 'realm', 'method', 'intent', 'request', 'expires'].includes(p[1] as string));

/** A mutated x402 PAYMENT-SIGNATURE (or legacy X-PAYMENT) header. */
function x402Header(rng: Rng, token: string): { headers: Record<string, string>; what: string } {
  const name = rng.chance(0.9) ? 'payment-signature' : 'x-payment';
  if (rng.chance(0.25)) {
    const g = garbageToken(rng, token, b64);
    return { headers: { [name]: g.value }, what: `${name}: ${g.what}` };
  }
  const m = mutateBound(rng, decodeToken(token), X402_BOUND, substitutes);
  const encode = rng.chance(0.8) ? b64 : b64url;
  return { headers: { [name]: encode(Buffer.from(JSON.stringify(m.value)).toString('latin1')) }, what: `${name} mutated: ${m.what}` };
}

function mppHeader(rng: Rng): { headers: Record<string, string>; what: string } {
  const scheme = rng.pick(['Payment ', 'Payment ', 'Payment ', 'payment ', 'PAYMENT\t', 'Payment  ']);
  if (rng.chance(0.25)) {
    const g = garbageToken(rng, mppToken, b64url);
    return { headers: { authorization: `${scheme}${g.value}` }, what: `authorization: ${JSON.stringify(scheme)} + ${g.what}` };
  }
  const m = mutateBound(rng, decodeToken(mppToken), MPP_BOUND, substitutes);
  return { headers: { authorization: `${scheme}${b64url(Buffer.from(JSON.stringify(m.value)).toString('latin1'))}` }, what: `authorization mutated: ${m.what}` };
}

function paidRouteCase(rng: Rng, family: 'x402-eip3009' | 'x402-permit2' | 'mpp'): CaseBody {
  const h = family === 'mpp' ? mppHeader(rng) : x402Header(rng, family === 'x402-eip3009' ? credentials.eip3009 : credentials.permit2);
  // now and then a mutated credential rides with a hostile (but fetch-sendable) path or the other protocol's garbage
  const path = rng.chance(0.85)
    ? `${paidPath}?${paidQuery}`
    : rng.pick([`${paidPath}/extra/segment`, `${paidPath}/%2e%2e/%2e%2e/fx/latest`, `${paidPath}?${paidQuery}&x=%ff`, `${paidPath}/..%2f..%2fcatjoke`]);
  const headers = rng.chance(0.1) && family !== 'mpp' ? { ...h.headers, ...mppHeader(rng).headers } : h.headers;
  const method = rng.chance(0.9) ? 'GET' : 'HEAD';
  return { kind: 'fetch', family, target: 'gateway', method, path, headers, what: `${method} ${path} ${h.what}` };
}

function stockCase(rng: Rng): CaseBody {
  const h = x402Header(rng, credentials.stock);
  const query = rng.chance(0.8)
    ? stockBuyPath
    : `/api/stock/buy?symbol=${rng.pick([stockSymbol, 'NOPE', '%ff', ''])}&stable_amount=${rng.pick(['1', '0', '1e3', '-1', '99999999'])}&recipient=${rng.pick(substitutes)}`;
  return { kind: 'fetch', family: 'stock-buy', target: 'gateway', method: 'POST', path: query, headers: h.headers, what: `POST ${query} ${h.what}` };
}

/** The valid stock credential, unmodified, on a buy of other terms: shares to someone else, or another symbol. */
function stockTermsCase(rng: Rng): CaseBody {
  const path = rng.chance(0.7)
    ? `/api/stock/buy?symbol=${stockSymbol}&stable_amount=1&recipient=${freshAccount().address}`
    : `/api/stock/buy?symbol=AAPL&stable_amount=1&recipient=${payerStock.address}`;
  return {
    kind: 'fetch',
    family: 'stock-terms',
    target: 'gateway',
    method: 'POST',
    path,
    headers: { 'payment-signature': credentials.stock },
    what: `valid stock credential for ${stockBuyPath}, sent to ${path}`,
  };
}

function sponsorCase(rng: Rng): CaseBody {
  // Only addresses that must never be sponsored: unknown ones (no stablecoin B), or a payer that approved Permit2.
  const address = rng.pick<Json>([
    freshAccount().address,
    payerStock.address,
    `0x${rng.hex(40)}`,
    `0x${rng.hex(39)}`,
    'not an address',
    null,
    1,
    [`0x${rng.hex(40)}`],
    '0x0000000000000000000000000000000000000000',
  ]);
  const random = rng.chance(0.4) ? hostileBody(rng) : { body: Buffer.from(JSON.stringify({ address })), what: `address ${JSON.stringify(address)}` };
  return {
    kind: 'fetch',
    family: 'sponsor',
    target: 'gateway',
    method: 'POST',
    path: '/api/gas/sponsor',
    headers: { 'content-type': rng.pick(CONTENT_TYPES) },
    body: random.body,
    what: `POST /api/gas/sponsor ${random.what}`,
  };
}

function bodyCase(rng: Rng, target: Target): CaseBody {
  const path = target === 'facilitator' ? rng.pick(['/verify', '/settle']) : rng.pick(['/api/merchants', '/m/llm-chat/chat', '/api/stock/buy?symbol=TSLA&stable_amount=1']);
  const b = hostileBody(rng);
  return { kind: 'fetch', family: 'bodies', target, method: 'POST', path, headers: { 'content-type': rng.pick(CONTENT_TYPES) }, body: b.body, what: `POST ${path} ${b.what} (${b.body.length} bytes)` };
}

const FACILITATOR_BOUND = (eip3009: boolean) => (p: JsonPath) =>
  p[0] === 'x402Version' ||
  (p[0] === 'paymentPayload' && (p[1] === 'payload' || p[1] === 'x402Version' || (p[1] === 'accepted' && ['scheme', 'network'].includes(p[2] as string)))) ||
  (p[0] === 'paymentRequirements' && ['scheme', 'network', 'amount', 'asset', 'payTo'].includes(p[1] as string)) ||
  (eip3009 && p[0] === 'paymentRequirements' && p[1] === 'extra' && ['name', 'version'].includes(p[2] as string));

function facilitatorMutationCase(rng: Rng): CaseBody {
  const { caip2, body } = rng.pick(facilitatorBodies);
  const m = mutateBound(rng, body, FACILITATOR_BOUND(caip2 !== CAIP2.stockChain), substitutes);
  const path = rng.pick(['/verify', '/settle']);
  return {
    kind: 'fetch',
    family: 'facilitator-mutation',
    target: 'facilitator',
    method: 'POST',
    path,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(m.value),
    what: `POST ${path} ${caip2}: ${m.what}`,
  };
}

function discoveryCase(rng: Rng): CaseBody {
  const path = rng.pick([
    '/openapi.json',
    '/.well-known/x402',
    '/.well-known/gate402',
    '/m/catjoke/openapi.json',
    '/m/%ff/openapi.json',
    '/m/..%2f/openapi.json',
    '/api/merchants',
    '/api/merchants/catjoke',
    '/api/stock/list',
    '/api/stock/orders?payer=%zz',
    '/supported',
  ]);
  const headers = rng.pick<Record<string, string>>([
    {},
    { accept: 'text/html' },
    { 'if-none-match': '*' },
    { range: 'bytes=-1' },
    { 'accept-encoding': 'br, gzip, deflate' },
    { 'x-forwarded-for': 'a, b, c' },
  ]);
  return { kind: 'fetch', family: 'discovery', target: path === '/supported' ? 'facilitator' : 'gateway', method: 'GET', path, headers, what: `GET ${path} ${JSON.stringify(headers)}` };
}

/** A valid credential, unmodified, on terms it was not made for. */
function replayOnOtherTermsCase(rng: Rng): CaseBody {
  const family = rng.pick(['mpp-source', 'facilitator-zero-self', 'stock-terms']);
  if (family === 'stock-terms') return stockTermsCase(rng);
  if (family === 'mpp-source') {
    const cred = decodeToken(mppToken) as Record<string, Json>;
    const other = rng.pick(substitutes.filter((a) => a.toLowerCase() !== payerMpp.address.toLowerCase()));
    const source = `did:pkh:eip155:${stockNet.chainId}:${other}`;
    return {
      kind: 'fetch',
      family,
      target: 'gateway',
      method: 'GET',
      path: `${paidPath}?${paidQuery}`,
      headers: { authorization: `Payment ${b64url(JSON.stringify({ ...cred, source }))}` },
      what: `valid MPP credential, source ${source}`,
    };
  }
  return {
    kind: 'fetch',
    family,
    target: 'facilitator',
    method: 'POST',
    path: '/settle',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(zeroSelfBody),
    what: 'zero-value EIP-3009 authorization from a fresh wallet to itself',
  };
}

/** The mix: weights per generator, drawn case by case from the seeded PRNG. */
const GENERATORS: Array<[number, (rng: Rng) => CaseBody]> = [
  [14, (rng) => pathCase(rng, 'gateway')],
  [4, (rng) => pathCase(rng, 'facilitator')],
  [6, (rng) => headerCase(rng, rng.chance(0.7) ? 'gateway' : 'facilitator')],
  [6, (rng) => chunkedCase(rng, rng.chance(0.7) ? 'gateway' : 'facilitator')],
  [9, (rng) => paidRouteCase(rng, 'x402-eip3009')],
  [9, (rng) => paidRouteCase(rng, 'x402-permit2')],
  [9, (rng) => paidRouteCase(rng, 'mpp')],
  [6, stockCase],
  [3, sponsorCase],
  [5, (rng) => bodyCase(rng, rng.chance(0.5) ? 'gateway' : 'facilitator')],
  [14, facilitatorMutationCase],
  [2, discoveryCase],
  [1, replayOnOtherTermsCase],
];

function generate(rng: Rng, count: number): FuzzCase[] {
  const total = GENERATORS.reduce((s, [w]) => s + w, 0);
  return Array.from({ length: count }, (_, id) => {
    let r = rng.int(total);
    for (const [w, gen] of GENERATORS) {
      if (r < w) return { id, ...gen(createRng((seed ^ Math.imul(id + 1, 0x9e3779b1)) >>> 0)) } as FuzzCase;
      r -= w;
    }
    throw new Error('unreachable');
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Sending, and what came back.

interface Outcome {
  c: FuzzCase;
  status?: number;
  /** uWebSockets.js answered by itself (505) or closed/reset without answering. */
  uws?: '505' | 'closed';
  timedOut?: boolean;
  body: string;
}

const agents = { gateway: new Agent({ connections: 16, keepAliveTimeout: 10_000 }), facilitator: new Agent({ connections: 16, keepAliveTimeout: 10_000 }) };
t.teardown(() => Promise.all([agents.gateway.close(), agents.facilitator.close()]));
const origin = (target: Target) => (target === 'gateway' ? gw : fac);

async function send(c: FuzzCase): Promise<Outcome & { ms: number }> {
  const started = performance.now();
  const o = await sendOnce(c);
  return { ...o, ms: performance.now() - started };
}

async function sendOnce(c: FuzzCase): Promise<Outcome> {
  const svc = origin(c.target);
  if (c.kind === 'raw') {
    const a = await rawExchange('127.0.0.1', svc.port, c.bytes, { timeoutMs: ANSWER_TIMEOUT_MS, bodyless: c.bodyless });
    if (a.timedOut && a.status === undefined) return { c, timedOut: true, body: '' };
    if (a.status === undefined) return { c, uws: 'closed', body: a.error ?? '' };
    return { c, status: a.status, ...(a.status === 505 ? { uws: '505' as const } : {}), body: a.body.toString('utf8').slice(0, 300) };
  }
  try {
    const res = await undiciFetch(`${svc.url}${c.path}`, {
      method: c.method,
      headers: c.headers,
      ...(c.body !== undefined ? { body: c.body } : {}),
      dispatcher: agents[c.target],
      signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS),
    });
    const text = await res.text();
    return { c, status: res.status, ...(res.status === 505 ? { uws: '505' as const } : {}), body: text.slice(0, 600) };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    if (e.name === 'TimeoutError' || e.name === 'AbortError') return { c, timedOut: true, body: '' };
    return { c, uws: 'closed', body: `${e.message} ${e.cause?.code ?? ''}` };
  }
}

async function runPool<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i] as T);
      }
    }),
  );
  return out;
}

t.test(`${TOTAL_CASES} generated requests: no 5xx of ours, no crash, no transaction, no upstream call, no money moved`, async (t) => {
  const [noncesBefore, balancesBefore] = await Promise.all([senderNonces(), balances()]);
  const callsBefore = fixtures.calls;

  const all = generate(createRng(seed), TOTAL_CASES);
  const cases = all.filter((c) => !onlyCases || onlyCases.includes(c.id));
  const started = Date.now();
  // Raw requests uWebSockets.js refuses silently hold their socket until its 10 s idle timeout: they get a pool of
  // their own, wide, so that they cost wall time once and not once per fetch slot.
  const [rawOutcomes, fetchOutcomes] = await Promise.all([
    runPool(
      cases.filter((c) => c.kind === 'raw'),
      RAW_CONCURRENCY,
      send,
    ),
    runPool(
      cases.filter((c) => c.kind === 'fetch').sort((a, b) => Number(FRESH_FIRST.has(b.family)) - Number(FRESH_FIRST.has(a.family))),
      CONCURRENCY,
      send,
    ),
  ]);
  const outcomes = [...rawOutcomes, ...fetchOutcomes].sort((a, b) => a.c.id - b.c.id);
  const seconds = (Date.now() - started) / 1000;

  const byFamily = new Map<string, Map<string, number>>();
  for (const o of outcomes) {
    const key = o.timedOut ? 'timeout' : o.uws ? `uws-${o.uws}` : String(o.status);
    const m = byFamily.get(o.c.family) ?? new Map<string, number>();
    m.set(key, (m.get(key) ?? 0) + 1);
    m.set('~ms', (m.get('~ms') ?? 0) + o.ms);
    byFamily.set(o.c.family, m);
  }
  t.comment(`sent ${outcomes.length} requests in ${seconds.toFixed(1)} s (seed ${seed})`);
  for (const [family, m] of [...byFamily].sort())
    t.comment(
      `  ${family}: ${[...m]
        .filter(([k]) => k !== '~ms')
        .sort()
        .map(([k, n]) => `${k}×${n}`)
        .join(' ')} (${Math.round(m.get('~ms') ?? 0)} ms in all)`,
    );
  for (const o of [...outcomes].sort((a, b) => b.ms - a.ms).slice(0, 5))
    t.comment(`  slowest: #${o.c.id} ${Math.round(o.ms)} ms ${o.c.family}: ${JSON.stringify(o.c.what.slice(0, 120))} => ${o.uws ?? o.status}`);
  const uws505 = outcomes.filter((o) => o.uws === '505');
  const uwsClosed = outcomes.filter((o) => o.uws === 'closed');
  t.comment(`uWebSockets.js itself: ${uws505.length} answered 505, ${uwsClosed.length} closed without an answer (not gate402's code; counted apart)`);
  const examples = new Map<string, Outcome>();
  for (const o of [...uws505, ...uwsClosed]) if (!examples.has(`${o.c.family} ${o.uws}`)) examples.set(`${o.c.family} ${o.uws}`, o);
  for (const [k, o] of examples) t.comment(`    e.g. ${k}: #${o.c.id} ${JSON.stringify(o.c.what.slice(0, 200))}`);

  const describe = (o: Outcome) => `#${o.c.id} [${o.c.family} -> ${o.c.target}] ${o.c.what.slice(0, 300)} => ${o.timedOut ? 'no answer' : o.status} ${o.body.slice(0, 300)}`;
  // Backpressure is an answer, not a fault: a paid request turned away while settlement is behind (503, Retry-After,
  // nothing charged); a flood of payments is what it is for. Counted apart; that nothing was charged is checked below.
  const shed = (o: Outcome) => o.status === 503 && /settlement is behind right now; nothing was (charged|settled)/.test(o.body);
  t.comment(`turned away by backpressure (503 before charging): ${outcomes.filter(shed).length}`);
  const ours5xx = outcomes.filter((o) => o.status !== undefined && o.status >= 500 && o.uws === undefined && !shed(o));
  t.same(ours5xx.slice(0, 25).map(describe), [], `no answer >= 500 from gate402's own code (${ours5xx.length} in all; replay with GATE402_FUZZ_SEED=${seed} GATE402_FUZZ_CASES=<ids>)`);
  const hung = outcomes.filter((o) => o.timedOut);
  t.same(hung.slice(0, 25).map(describe), [], `every request answered or refused within ${ANSWER_TIMEOUT_MS / 1000} s (${hung.length} not)`);
  const accepted = outcomes.filter(
    (o) =>
      o.status !== undefined &&
      o.status >= 200 &&
      o.status < 300 &&
      /^(x402|mpp|stock|facilitator-mutation|facilitator-zero-self)/.test(o.c.family) &&
      !(o.c.target === 'facilitator' && /"isValid":false|"success":false/.test(o.body)),
  );
  t.same(
    accepted.slice(0, 25).map((o) => `${describe(o)}${o.body.slice(300)}`),
    [],
    'no mutated credential was accepted',
  );
  if (!onlyCases) t.ok(outcomes.length >= 5000, `at least 5000 requests sent (${outcomes.length})`);

  // The victims' view.
  t.equal(gw.child.exitCode ?? gw.child.signalCode, null, 'the gateway is alive');
  t.equal(fac.child.exitCode ?? fac.child.signalCode, null, 'the facilitator is alive');
  t.equal((await undiciFetch(`${gw.url}/health`)).status, 200, 'the gateway answers /health');
  t.equal((await undiciFetch(`${fac.url}/health`)).status, 200, 'the facilitator answers /health');
  t.equal(fixtures.calls - callsBefore, 0, 'not one upstream call (no valid credential was ever sent unmodified where it could pay)');
  t.same(await senderNonces(), noncesBefore, 'not one transaction by a relayer or the stock desk, on any chain');
  t.same(await balances(), balancesBefore, 'every payer, the merchant and the payee hold what they held');
});
