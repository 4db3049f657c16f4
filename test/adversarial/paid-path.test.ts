/**
 * The paid path, attacked: hostile paths and escapes with valid credentials, upstreams that misbehave after the
 * buyer paid (redirects, endless bodies, unsendable headers, timeouts), HEAD, bodies, and one credential sent twenty
 * times at once. Every refusal is checked where a victim would look: the chain (payer, merchant, relayer nonces)
 * and the upstream (which paths it was called on, and how often).
 */
import t, { type Test } from 'tap';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { parseUnits, type Address, type LocalAccount } from 'viem';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { DEVNET_UPSTREAM_SECRET } from '../../src/cli/service.ts';
import { network, tester, testDevnet } from '../helpers/devnet.ts';
import { startHostileUpstream, type HostileUpstream } from '../helpers/hostile-upstream.ts';
import { mppCredential, registerOwnMerchant, relayerTxCount, spawnPaidGateway, x402Credential } from '../helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from '../helpers/payments.ts';
import { rawRequest, type RawResponse } from '../helpers/raw-http.ts';

const manifest = testDevnet();
const funder = tester('attackPaid');
const base = network(manifest, CAIP2.base);
const stock = network(manifest, CAIP2.stockChain);
const upstream: HostileUpstream = await startHostileUpstream();
t.teardown(() => upstream.close());
const UPSTREAM_MAX_BYTES = 256 * 1024;
const { gw, relayers } = await spawnPaidGateway(manifest, upstream.origin, {
  GATE402_UPSTREAM_TIMEOUT_MS: '3000',
  GATE402_UPSTREAM_MAX_BYTES: String(UPSTREAM_MAX_BYTES),
});
t.teardown(() => gw.stop());

// A merchant of this file's own (a fresh payee): its balance moves only with the payments made here.
const { slug, payTo: merchant } = await registerOwnMerchant(gw.url, upstream.origin, { slug: `attacked-${Date.now().toString(36)}`, priceUsd: '0.005000', networks: [CAIP2.base, CAIP2.stockChain] });
const M = `/m/${slug}/data`;
const U = `/${slug}/data`;
const SECRET = `${slug}-secret`;
const PRICE = 5_000n;

interface Money {
  payer: bigint;
  merchant: bigint;
  relayerTxs: number;
}
async function money(payer: Address, merchant: Address, n = base): Promise<Money> {
  return { payer: await stableBalance(n, payer), merchant: await stableBalance(n, merchant), relayerTxs: await relayerTxCount(n, relayers) };
}

function jsonOf(res: RawResponse): Record<string, unknown> | undefined {
  try {
    return JSON.parse(res.body) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

const get = (target: string, headers: Record<string, string> = {}) => rawRequest(gw.url, 'GET', target, { headers });

/** Paths that would leave the route upstream (e.g. for `/catjoke/joke`), in every spelling an attacker has. */
const HOSTILE_PATHS = [
  `${M}/%2e%2e/%2e%2e/catjoke/joke`,
  `${M}/%2E%2E/%2E%2E/catjoke/joke`,
  `${M}/%2e%2E/%2E%2e/catjoke/joke`,
  `${M}/.%2e/.%2E/catjoke/joke`,
  `${M}/%2e./%2E./catjoke/joke`,
  `${M}/../../catjoke/joke`,
  `${M}/./x`,
  `${M}/%2e`,
  `/m/${slug}/%2e%2e/catjoke/joke`,
  `${M}/..%2f..%2fcatjoke%2fjoke`,
  `${M}/..%2F..%2Fcatjoke%2Fjoke`,
  `${M}/%2F%2Fevil.example%2Fx`,
  `${M}/..\\..\\catjoke\\joke`,
  `${M}/..%5c..%5ccatjoke%5cjoke`,
  `${M}/..%5C..%5Ccatjoke`,
  `${M}/x%00y`,
  `${M}/%00`,
  `${M}/x%0d%0aHost:%20evil`,
  `${M}/x%09y`,
  `${M}/%7f`,
  `${M}/%c2%85`,
  `${M}/%c0%ae%c0%ae/catjoke`,
  `${M}/%e0%80%ae%e0%80%ae/catjoke`,
  `${M}/%ZZ`,
  `${M}/%e0%a4`,
  `${M}/%`,
  `${M}?base=%ZZ`,
  `${M}?base=%C3%28`,
  `${M}?base=%E0%A4`,
];

async function refusedBeforePayment(t: Test, credential: Record<string, string>, payer: LocalAccount, paths: string[]): Promise<void> {
  const before = await money(payer.address, merchant);
  const seenBefore = upstream.seen.length;
  for (const path of paths) {
    const res = await get(path, credential);
    t.equal(res.status, 400, `${path} -> 400 (${res.body.slice(0, 120)})`);
    const body = jsonOf(res);
    t.ok(typeof body?.error === 'string', `${path}: a JSON error`);
    t.match(res.headers['content-type'] ?? '', /application\/json/);
    t.equal(res.headers['payment-response'], undefined, `${path}: no settlement`);
  }
  t.equal(upstream.seen.length, seenBefore, 'the upstream was not called for any of them');
  t.same(await money(payer.address, merchant), before, 'payer, merchant and relayers untouched: nothing settled');
}

t.test('x402: a valid credential on hostile paths is refused with 400 before the payment is touched; then it buys the real route once', async (t) => {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const credential = { 'payment-signature': await x402Credential(`${gw.url}${M}`, payer, CAIP2.base) };
  await refusedBeforePayment(t, credential, payer, HOSTILE_PATHS);
  const before = await money(payer.address, merchant);
  const ok = await get(`${M}/ok-segment?base=EUR`, credential);
  t.equal(ok.status, 200, ok.body);
  t.equal(upstream.callsTo(`${U}/ok-segment`), 1, 'one upstream call, on the route');
  const last = upstream.seen.at(-1);
  t.equal(last?.url, `${U}/ok-segment?base=EUR`);
  t.equal(last?.headers['x-api-key'], SECRET, "the merchant's secret went to its own route");
  t.same(upstream.callsOutside(`${U}/`), [], 'no upstream call outside the route ever');
  const after = await money(payer.address, merchant);
  t.same([before.payer - after.payer, after.merchant - before.merchant, after.relayerTxs - before.relayerTxs], [PRICE, PRICE, 1], 'charged once, paid once, one transaction');
});

t.test('MPP: a valid mppx credential on hostile paths is refused with 400, nothing settles; then it buys the route once', async (t) => {
  const payer = await fundedPayer(stock, CAIP2.stockChain, funder, parseUnits('1', 6), { approvePermit2: false });
  const credential = { authorization: await mppCredential(`${gw.url}${M}`, payer, stock) };
  const before = await money(payer.address, merchant, stock);
  const seenBefore = upstream.seen.length;
  for (const path of [`${M}/%2e%2e/%2e%2e/catjoke/joke`, `${M}/..%2f..%2fcatjoke`, `${M}/..%5ccatjoke`, `${M}/%00`, `${M}/%ZZ`]) {
    const res = await get(path, credential);
    t.equal(res.status, 400, `${path} -> 400`);
    t.ok(jsonOf(res)?.error, 'a JSON error');
  }
  t.equal(upstream.seen.length, seenBefore, 'no upstream call');
  t.same(await money(payer.address, merchant, stock), before, 'nothing settled');
  const ok = await get(`${M}/mpp`, credential);
  t.equal(ok.status, 200, ok.body);
  t.ok(ok.headers['payment-receipt'], 'with a receipt');
  t.equal(upstream.callsTo(`${U}/mpp`), 1);
  const after = await money(payer.address, merchant, stock);
  t.same([before.payer - after.payer, after.merchant - before.merchant, after.relayerTxs - before.relayerTxs], [PRICE, PRICE, 1]);
});

t.test('appended segments reach the upstream canonically encoded, inside the route; the paid answer is private and nosniff', async (t) => {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const credential = { 'payment-signature': await x402Credential(`${gw.url}${M}`, payer, CAIP2.base) };
  const res = await get(`${M}/a%20b/..%3B/x;y/%252e%252e/caf%C3%A9/%2e%2e%2e/it's`, credential);
  t.equal(res.status, 200, res.body);
  t.equal(upstream.seen.at(-1)?.path, `${U}/a%20b/..%3B/x%3By/%252e%252e/caf%C3%A9/.../it%27s`, 'each segment decoded, checked and encoded again');
  t.same(upstream.callsOutside(`${U}/`), []);
  t.equal(res.headers['cache-control'], 'private, no-store', "the upstream's public max-age is overridden");
  t.match(res.headers.vary ?? '', /PAYMENT-SIGNATURE/);
  t.match(res.headers.vary ?? '', /Authorization/);
  t.equal(res.headers['x-content-type-options'], 'nosniff');
  t.equal(res.headers['content-security-policy'], undefined, 'JSON needs no sandbox');
  t.equal(res.headers.server, undefined);
});

t.test('a file merchant: hostile paths refused before payment; the file is served private and nosniff', async (t) => {
  const content = Buffer.from('name,price\nwidget,1\n');
  const file = await registerOwnMerchant(gw.url, upstream.origin, {
    slug: `file-${Date.now().toString(36)}`,
    priceUsd: '0.005000',
    networks: [CAIP2.base],
    file: { fileName: 'prices.csv', contentType: 'text/csv', content },
  });
  const F = `/m/${file.slug}/data`;
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const credential = { 'payment-signature': await x402Credential(`${gw.url}${F}`, payer, CAIP2.base) };
  const before = await money(payer.address, file.payTo);
  for (const path of [`${F}/%2e%2e/%2e%2e/x`, `${F}/..%2fx`, `${F}/a%5cb`, `${F}/%00`, `${F}/%ZZ`]) {
    const res = await get(path, credential);
    t.equal(res.status, 400, `${path} -> 400`);
    t.ok(jsonOf(res)?.error);
  }
  t.same(await money(payer.address, file.payTo), before, 'nothing settled');
  const res = await get(F, credential);
  t.equal(res.status, 200, res.body);
  t.equal(res.body, content.toString(), 'the file');
  t.equal(res.headers['cache-control'], 'private, no-store');
  t.equal(res.headers['x-content-type-options'], 'nosniff');
  const after = await money(payer.address, file.payTo);
  t.same([before.payer - after.payer, after.merchant - before.merchant, after.relayerTxs - before.relayerTxs], [PRICE, PRICE, 1]);
});

t.test('bad escapes anywhere on the gateway answer 400 JSON (or a 404/402), never a 5xx', async (t) => {
  const targets = [
    `${M}%ZZ`,
    '/m/%ZZ/latest',
    `${M}?q=%ZZ`,
    `${M}?q=%C3%28`,
    '/m/%ZZ/openapi.json',
    '/api/merchants/%ZZ',
    '/api/merchants/%C3%28',
    `/m/${slug}/%C3%28`,
    '/.well-known/x402?x=%ZZ',
    '/openapi.json?%E0%A4',
  ];
  const before = upstream.seen.length;
  for (const target of targets) {
    const res = await get(target);
    t.ok(res.status > 0 && res.status < 500, `${target} -> ${res.status}`);
    if (res.status === 400) t.ok(jsonOf(res)?.error, `${target}: JSON error`);
  }
  for (const target of [`${M}%ZZ`, '/m/%ZZ/latest', `${M}?q=%ZZ`, `${M}?q=%C3%28`, `/m/${slug}/%C3%28`]) {
    t.equal((await get(target)).status, 400, `${target} is a client error`);
  }
  t.equal(upstream.seen.length, before, 'no upstream call');
});

/** Pays `path` with a fresh payer; returns the answer, the credential and the money before. */
async function payFx(path: string): Promise<{ res: RawResponse; credential: Record<string, string>; payer: LocalAccount; before: Money }> {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const credential = { 'payment-signature': await x402Credential(`${gw.url}${M}`, payer, CAIP2.base) };
  const before = await money(payer.address, merchant);
  const res = await get(path, credential);
  return { res, credential, payer, before };
}

async function chargedOnce(t: Test, payer: LocalAccount, before: Money): Promise<void> {
  const after = await money(payer.address, merchant);
  t.same([before.payer - after.payer, after.merchant - before.merchant, after.relayerTxs - before.relayerTxs], [PRICE, PRICE, 1], 'charged once, merchant paid once, one transaction');
}

function isProof(t: Test, res: RawResponse): void {
  t.equal(res.status, 502, res.body);
  const body = jsonOf(res) as { transaction?: string; network?: string } | undefined;
  t.match(body?.transaction ?? '', /^0x[0-9a-f]{64}$/, 'the settlement transaction');
  t.equal(body?.network, CAIP2.base);
  const proof = decodePaymentResponseHeader(res.headers['payment-response'] as string);
  t.equal(proof.transaction, body?.transaction, 'PAYMENT-RESPONSE carries it too');
  t.equal(res.headers.location, undefined, 'no Location');
  t.notMatch(res.raw, new RegExp(`${new URL(upstream.origin).port}|${SECRET}|${DEVNET_UPSTREAM_SECRET}`), 'nothing names the upstream');
}

t.test('an upstream redirect after payment: 502 with the proof, never followed; the credential then buys the resource once', async (t) => {
  upstream.behave(`${U}/redirect`, (_req, res) => {
    res.writeHead(302, { location: `${upstream.origin}/catjoke/joke` });
    res.end();
  });
  const { res, credential, payer, before } = await payFx(`${M}/redirect`);
  isProof(t, res);
  t.equal(upstream.callsTo('/catjoke/joke'), 0, 'the redirect was not followed');
  upstream.behave(`${U}/redirect`, undefined);
  const again = await get(`${M}/redirect`, credential);
  t.equal(again.status, 200, again.body);
  t.equal(upstream.callsTo(`${U}/redirect`), 2, 'one failed call, one served');
  await chargedOnce(t, payer, before);
});

t.test('an endless upstream body: the read stops at GATE402_UPSTREAM_MAX_BYTES, 502 with the proof; then served once', async (t) => {
  let written = 0;
  let closed = false;
  upstream.behave(`${U}/endless`, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    const pump = () => {
      while (!closed && written < 512 * 1024 * 1024) {
        written += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    res.on('close', () => (closed = true));
    pump();
  });
  const { res, credential, payer, before } = await payFx(`${M}/endless`);
  isProof(t, res);
  const deadline = Date.now() + 30_000;
  while (!closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  t.ok(closed, 'the gateway hung up on the upstream');
  t.ok(written < 64 * 1024 * 1024, `it stopped reading early (${written} bytes written by the upstream, limit ${UPSTREAM_MAX_BYTES})`);
  upstream.behave(`${U}/endless`, undefined);
  const again = await get(`${M}/endless`, credential);
  t.equal(again.status, 200, again.body);
  await chargedOnce(t, payer, before);
});

t.test('an upstream announcing a body over GATE402_UPSTREAM_MAX_BYTES: 502 with the proof, the gateway stays up; then served once', async (t) => {
  upstream.behave(`${U}/announced`, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(UPSTREAM_MAX_BYTES * 4) });
    res.write('{"partial":');
  });
  const { res, credential, payer, before } = await payFx(`${M}/announced`);
  isProof(t, res);
  upstream.behave(`${U}/announced`, undefined);
  const again = await get(`${M}/announced`, credential);
  t.equal(again.status, 200, again.body);
  await chargedOnce(t, payer, before);
});

t.test('an upstream that never answers: 502 with the proof after the timeout; the same credential redeems once it works', async (t) => {
  upstream.behave(`${U}/slow`, () => new Promise<void>(() => {})); // holds the request open
  const { res, credential, payer, before } = await payFx(`${M}/slow`);
  isProof(t, res);
  upstream.behave(`${U}/slow`, undefined);
  const again = await get(`${M}/slow`, credential);
  t.equal(again.status, 200, again.body);
  const replay = await get(`${M}/slow`, credential);
  t.equal(replay.status, 402, 'served once: the credential buys nothing more');
  t.equal(upstream.callsTo(`${U}/slow`), 2);
  await chargedOnce(t, payer, before);
});

t.test('unsendable upstream headers are dropped, HTML is sandboxed: 200, never a 500', async (t) => {
  upstream.behave(`${U}/html`, (_req, _res, socket) => {
    const body = '<script>alert(document.cookie)</script>';
    const head = [
      'HTTP/1.1 200 OK',
      'Content-Type: text/html',
      'Content-Language: \u20ac',
      'ETag: "\u00e9t\u00e9"',
      'Cache-Control: public, max-age=86400',
      `Content-Length: ${Buffer.byteLength(body)}`,
      'Connection: close',
    ].join('\r\n');
    socket.end(Buffer.concat([Buffer.from(`${head}\r\n\r\n`, 'utf8'), Buffer.from(body)]));
  });
  const { res, payer, before } = await payFx(`${M}/html`);
  t.equal(res.status, 200, res.body);
  t.equal(res.body, '<script>alert(document.cookie)</script>', 'the body, as the merchant sent it');
  t.equal(res.headers['content-security-policy'], "sandbox; default-src 'none'", 'HTML gets a sandboxing CSP');
  t.equal(res.headers['content-language'], undefined, 'a non-Latin-1 value is dropped');
  t.equal(res.headers.etag, undefined, 'an 8-bit value is dropped');
  t.equal(res.headers['cache-control'], 'private, no-store');
  t.equal(res.headers['x-content-type-options'], 'nosniff');
  await chargedOnce(t, payer, before);
  upstream.behave(`${U}/html`, undefined);
});

t.test('HEAD with a valid credential answers the 402 and spends nothing; GET then buys the resource', async (t) => {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const credential = { 'payment-signature': await x402Credential(`${gw.url}${M}`, payer, CAIP2.base) };
  const before = await money(payer.address, merchant);
  const seen = upstream.seen.length;
  const head = await rawRequest(gw.url, 'HEAD', `${M}/head`, { headers: credential });
  t.equal(head.status, 402);
  t.ok(head.headers['payment-required'], 'the challenge, for the price');
  t.equal(head.headers['payment-response'], undefined);
  t.equal(upstream.seen.length, seen, 'no upstream call');
  t.same(await money(payer.address, merchant), before, 'nothing settled');
  const res = await get(`${M}/head`, credential);
  t.equal(res.status, 200, res.body);
  await chargedOnce(t, payer, before);
});

t.test('bodies: paid routes take 1 MiB; a forged credential is refused before its body is read; registration keeps its limit', async (t) => {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const credential = await x402Credential(`${gw.url}${M}`, payer, CAIP2.base);
  const before = await money(payer.address, merchant);
  const seen = upstream.seen.length;

  const big = await rawRequest(gw.url, 'POST', `${M}/chat`, {
    headers: { 'payment-signature': credential, 'content-type': 'application/json' },
    body: Buffer.from('{'),
    contentLength: 2 * 1024 * 1024,
  });
  t.equal(big.status, 413, 'over the paid routes’ 1 MiB, refused on its Content-Length');
  t.ok(jsonOf(big)?.error);

  const forged = forge(credential);
  const started = Date.now();
  const early = await rawRequest(gw.url, 'POST', `${M}/chat`, {
    headers: { 'payment-signature': forged, 'content-type': 'application/json' },
    body: Buffer.from('{"messages":['),
    contentLength: 900_000,
    timeoutMs: 30_000,
  });
  t.equal(early.status, 402, `a forged signature is refused without the body (${early.body.slice(0, 160)})`);
  t.ok(Date.now() - started < 30_000, 'answered while the body was still owed');
  t.equal(upstream.seen.length, seen, 'no upstream call');
  t.same(await money(payer.address, merchant), before, 'nothing settled');

  const payload = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(512 * 1024) }] }));
  const ok = await rawRequest(gw.url, 'POST', `${M}/chat`, { headers: { 'payment-signature': credential, 'content-type': 'application/json' }, body: payload });
  t.equal(ok.status, 200, ok.body.slice(0, 200));
  t.equal(upstream.seen.at(-1)?.body.length, payload.length, 'the whole body reached the upstream');
  await chargedOnce(t, payer, before);

  const registration = await rawRequest(gw.url, 'POST', '/api/merchants', { headers: { 'content-type': 'application/json' }, body: Buffer.from(`{"registration":${' '.repeat(1_500_000)}1}`) });
  t.not(registration.status, 413, `registration still takes more than the paid limit (${registration.status})`);
  t.ok(registration.status < 500);
});

/** The same credential with its signature altered: it still decodes and matches the offer. */
function forge(header: string): string {
  const decoded = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as { payload: { signature: string } };
  const sig = decoded.payload.signature;
  decoded.payload.signature = `${sig.slice(0, 10)}${sig[10] === 'a' ? 'b' : 'a'}${sig.slice(11)}`;
  return Buffer.from(JSON.stringify(decoded)).toString('base64');
}

t.test('one fresh credential sent 20 times at once: exactly one 200, one upstream call, one transfer', async (t) => {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const credential = { 'payment-signature': await x402Credential(`${gw.url}${M}`, payer, CAIP2.base) };
  const before = await money(payer.address, merchant);
  const answers = await Promise.all(Array.from({ length: 20 }, () => get(`${M}/burst`, credential)));
  const statuses = answers.map((a) => a.status);
  t.equal(statuses.filter((s) => s === 200).length, 1, `exactly one 200 (${statuses.join(',')})`);
  t.ok(
    statuses.every((s) => s === 200 || s === 402),
    'the others are refused as already used',
  );
  t.equal(upstream.callsTo(`${U}/burst`), 1, 'one upstream call');
  await chargedOnce(t, payer, before);
});

t.test('over the whole file, the upstream was only ever called inside the paid route', async (t) => {
  const outside = upstream.seen.filter((r) => !r.path.startsWith(`${U}/`) && r.path !== `${U}`);
  t.same(
    outside.map((r) => r.url),
    [],
    'every upstream call was inside a paid route',
  );
});
