/**
 * MPP credentials used where they were not issued for, against the real gateway over sockets. The official `mppx`
 * client makes the credentials; the attacks replay or edit them. A refused credential must move nothing: payer and
 * merchant balances, the gateway's relayer nonces and the upstream's call count stay as they were.
 */
import t from 'tap';
import { BodyDigest } from 'mppx';
import { Mppx, evm } from 'mppx/client';
import { charge as mppxEvmCharge } from 'mppx/evm/client';
import { Challenge } from 'mppx';
import { parseEther, parseUnits, toHex, type LocalAccount } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';
import { opaqueFor, routeTag } from '../../src/protocol/mpp/binding.ts';
import { createChallenge, decodeRequest } from '../../src/protocol/mpp/challenge.ts';
import { formatWwwAuthenticate, parseWwwAuthenticate } from '../../src/protocol/mpp/www-authenticate.ts';
import { formatAuthorizationPayment, parseAuthorizationPayment } from '../../src/protocol/mpp/credential.ts';
import type { PaymentChallenge, PaymentCredential } from '../../src/protocol/mpp/types.ts';
import { utf8 } from '../../src/protocol/x402/codec.ts';
import { clientsFor, network, tester, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { fundedPayer, stableBalance } from '../helpers/payments.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';

const manifest = testDevnet();
const funder = tester('attackMpp');
const stock = network(manifest, CAIP2.stockChain);
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());

// Relayers of our own, so that their nonces count this file's transactions only.
const relayerKeys = [generatePrivateKey(), generatePrivateKey()];
const relayers = relayerKeys.map((k) => privateKeyToAccount(k).address);
for (const n of Object.values(manifest.networks)) {
  for (const r of relayers) await rpcCall(n.rpcUrl, 'anvil_setBalance', [r, toHex(parseEther('10'))]);
}
const MPP_SECRET = 'mpp-binding-test-secret-of-at-least-32-bytes';
const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: TEST_MANIFEST_PATH,
  env: {
    GATE402_RELAYER_KEYS: relayerKeys.join(','),
    GATE402_CATALOG_UPSTREAM_BASE: new URL(fixtures.baseUrlFor('weather')).origin,
    GATE402_MPP_SECRET: MPP_SECRET,
  },
});
t.teardown(() => gw.stop());

const forecast = `${gw.url}/m/weather/forecast?latitude=52.52&longitude=13.41`;
const geocode = `${gw.url}/m/weather/geocode?name=Berlin`;
const chat = `${gw.url}/m/llm-chat/chat`;
const chatBody = (text: string) => JSON.stringify({ model: 'fixture-model', messages: [{ role: 'user', content: text }] });
const json = { 'content-type': 'application/json' };

/** The MPP challenge of an unpaid 402. */
async function challengeOf(url: string, init: RequestInit = {}): Promise<PaymentChallenge> {
  const res = await fetch(url, init);
  await res.arrayBuffer();
  if (res.status !== 402) throw new Error(`expected 402 from ${url}, got ${res.status}`);
  const parsed = parseWwwAuthenticate(res.headers.get('www-authenticate') ?? '');
  if (!parsed.ok || !parsed.value[0]) throw new Error(`no MPP challenge from ${url}`);
  return parsed.value[0];
}

/** mppx pays `url`, but its paid retry is kept here instead of sent: the credential, unspent. */
async function credentialFor(payer: LocalAccount, url: string, init: RequestInit = {}): Promise<string> {
  let captured: string | undefined;
  const capturing: typeof fetch = async (input, reqInit) => {
    const req = new Request(input as Parameters<typeof fetch>[0], reqInit);
    const auth = req.headers.get('authorization');
    if (auth?.startsWith('Payment ')) {
      captured = auth;
      return new Response('kept', { status: 418 });
    }
    return fetch(req);
  };
  const mppx = Mppx.create({ methods: [evm({ account: payer, authorization: { name: stock.stablecoin.name, version: stock.stablecoin.version } })], polyfill: false, fetch: capturing });
  const res = await mppx.fetch(url, init);
  await res.arrayBuffer();
  if (captured === undefined) throw new Error(`mppx made no credential for ${url} (status ${res.status})`);
  return captured;
}

function decode(header: string): PaymentCredential {
  const parsed = parseAuthorizationPayment(header);
  if (!parsed.ok) throw new Error(parsed.error.message);
  return parsed.value;
}

async function send(url: string, authorization: string, init: RequestInit = {}): Promise<{ status: number; problem: string | undefined; text: string }> {
  const res = await fetch(url, { ...init, headers: { ...(init.headers as Record<string, string> | undefined), authorization } });
  const text = await res.text();
  let problem: string | undefined;
  try {
    problem = (JSON.parse(text) as { type?: string }).type?.replace('https://paymentauth.org/problems/', '');
  } catch {
    problem = undefined;
  }
  return { status: res.status, problem, text };
}

async function relayerNonces(): Promise<number> {
  const { pub } = clientsFor(stock, funder);
  const counts = await Promise.all(relayers.map((address) => pub.getTransactionCount({ address, blockTag: 'pending' })));
  return counts.reduce((a, b) => a + b, 0);
}

interface Snapshot {
  payer: bigint;
  merchant: bigint;
  nonces: number;
  upstream: number;
}
async function snapshot(payer: LocalAccount, merchant: `0x${string}`): Promise<Snapshot> {
  return { payer: await stableBalance(stock, payer.address), merchant: await stableBalance(stock, merchant), nonces: await relayerNonces(), upstream: fixtures.calls };
}

async function merchantOf(url: string, init: RequestInit = {}): Promise<{ merchant: `0x${string}`; amount: bigint }> {
  const request = decodeRequest((await challengeOf(url, init)).request);
  if (!request.ok) throw new Error(request.error.message);
  return { merchant: request.value.recipient, amount: BigInt(request.value.amount) };
}

const payerWith = (usd: string) => fundedPayer(stock, CAIP2.stockChain, funder, parseUnits(usd, 6), { approvePermit2: false });

t.test('the official mppx client pays a POST route; the challenge was bound to the body it sent', async (t) => {
  const payer = await payerWith('1');
  const body = chatBody('hello over MPP');
  const { merchant, amount } = await merchantOf(chat, { method: 'POST', headers: json, body });
  const before = await snapshot(payer, merchant);
  const digests: Array<string | null> = [];
  const watching: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const header = res.headers.get('www-authenticate');
    if (header) digests.push(parseWwwAuthenticate(header).ok ? ((parseWwwAuthenticate(header) as { value: PaymentChallenge[] }).value[0]?.digest ?? null) : null);
    return res;
  };
  const mppx = Mppx.create({ methods: [evm({ account: payer, authorization: { name: stock.stablecoin.name, version: stock.stablecoin.version } })], polyfill: false, fetch: watching });
  const res = await mppx.fetch(chat, { method: 'POST', headers: json, body });
  const text = await res.text();
  t.equal(res.status, 200, text);
  t.same(digests, [BodyDigest.compute(body)], 'the 402 carried the digest of the body, as mppx computes it');
  t.equal((JSON.parse(text) as { _request: { body: string } })._request.body, body, 'the upstream received that body');
  const after = await snapshot(payer, merchant);
  t.equal(after.merchant - before.merchant, amount, 'the merchant was paid once');
  t.equal(before.payer - after.payer, amount);
  t.equal(after.upstream - before.upstream, 1, 'one upstream call');
  t.equal(after.nonces - before.nonces, 1, 'one relayer transaction');
});

t.test('a challenge issued for another route of the same price and recipient does not pay', async (t) => {
  const payer = await payerWith('1');
  const a = await merchantOf(forecast);
  const b = await merchantOf(geocode);
  t.same([a.merchant, a.amount], [b.merchant, b.amount], 'the two routes have the same price and recipient');
  const credential = await credentialFor(payer, forecast);
  const before = await snapshot(payer, a.merchant);
  const swapped = await send(geocode, credential);
  t.equal(swapped.status, 402, swapped.text);
  t.equal(swapped.problem, 'invalid-challenge');
  const burst = await Promise.all(Array.from({ length: 5 }, () => send(geocode, credential)));
  t.ok(
    burst.every((r) => r.status === 402 && r.problem === 'invalid-challenge'),
    'again and again, concurrently',
  );
  t.same(await snapshot(payer, a.merchant), before, 'nothing moved, no relayer transaction, no upstream call');
  const own = await send(forecast, credential);
  t.equal(own.status, 200, 'the same credential still pays the route it was issued for');
  const after = await snapshot(payer, a.merchant);
  t.equal(after.merchant - before.merchant, a.amount);
  t.equal(after.upstream - before.upstream, 1);
});

t.test('a challenge issued for GET does not pay a POST of the same route, nor the reverse', async (t) => {
  const payer = await payerWith('1');
  const stocks = `${gw.url}/m/chain-stocks/stocks`;
  const { merchant } = await merchantOf(stocks);
  const forGet = await credentialFor(payer, stocks);
  const forPost = await credentialFor(payer, stocks, { method: 'POST', headers: json, body: '{}' });
  const before = await snapshot(payer, merchant);
  const asPost = await send(stocks, forGet, { method: 'POST', headers: json, body: '{}' });
  t.equal(asPost.status, 402, asPost.text);
  t.equal(asPost.problem, 'invalid-challenge');
  const asGet = await send(stocks, forPost);
  t.equal(asGet.status, 402, asGet.text);
  t.equal(asGet.problem, 'invalid-challenge');
  t.same(await snapshot(payer, merchant), before, 'nothing moved');
});

t.test('a credential whose challenge was bound to one body does not pay for another', async (t) => {
  const payer = await payerWith('1');
  const bodyA = chatBody('the body that was priced');
  const bodyB = chatBody('a different, longer request slipped in after the 402');
  const { merchant, amount } = await merchantOf(chat, { method: 'POST', headers: json, body: bodyA });
  const credential = await credentialFor(payer, chat, { method: 'POST', headers: json, body: bodyA });
  t.equal(decode(credential).challenge.digest, BodyDigest.compute(bodyA), 'mppx echoed the digest');
  const before = await snapshot(payer, merchant);
  const other = await send(chat, credential, { method: 'POST', headers: json, body: bodyB });
  t.equal(other.status, 402, other.text);
  t.equal(other.problem, 'verification-failed');
  t.match(other.text, /body/);
  const none = await send(chat, credential, { method: 'POST', headers: json });
  t.equal(none.status, 402, 'no body at all');
  t.equal(none.problem, 'verification-failed');
  // Editing the echoed digest to match the new body breaks the challenge's HMAC.
  const edited = decode(credential);
  edited.challenge.digest = BodyDigest.compute(bodyB);
  const forged = await send(chat, formatAuthorizationPayment(edited), { method: 'POST', headers: json, body: bodyB });
  t.equal(forged.status, 402);
  t.equal(forged.problem, 'invalid-challenge');
  delete edited.challenge.digest;
  const stripped = await send(chat, formatAuthorizationPayment(edited), { method: 'POST', headers: json, body: bodyB });
  t.equal(stripped.problem, 'invalid-challenge', 'nor can the digest be dropped');
  t.same(await snapshot(payer, merchant), before, 'nothing moved, no relayer transaction, no upstream call');
  const own = await send(chat, credential, { method: 'POST', headers: json, body: bodyA });
  t.equal(own.status, 200, `the body it was issued for is served: ${own.text}`);
  t.equal((await stableBalance(stock, merchant)) - before.merchant, amount);
});

t.test('a credential whose source is not its signer is refused', async (t) => {
  const payer = await payerWith('1');
  const { merchant, amount } = await merchantOf(forecast);
  const credential = await credentialFor(payer, forecast);
  const original = decode(credential);
  t.equal(original.source, `did:pkh:eip155:${stock.chainId}:${payer.address}`, 'mppx names the payer');
  const before = await snapshot(payer, merchant);
  const someoneElse = privateKeyToAccount(generatePrivateKey()).address;
  for (const source of [`did:pkh:eip155:${stock.chainId}:${someoneElse}`, `did:pkh:eip155:8453:${payer.address}`]) {
    const r = await send(forecast, formatAuthorizationPayment({ ...original, source }));
    t.equal(r.status, 402, source);
    t.equal(r.problem, 'verification-failed');
  }
  t.same(await snapshot(payer, merchant), before, 'nothing moved');
  const lower = await send(forecast, formatAuthorizationPayment({ ...original, source: original.source?.toLowerCase() as string }));
  t.equal(lower.status, 200, 'the signer, in any letter case, pays');
  t.equal((await stableBalance(stock, merchant)) - before.merchant, amount);
});

t.test('edited or broken credentials: 400 for another method, 402 with the matching problem otherwise', async (t) => {
  const payer = await payerWith('1');
  const { merchant } = await merchantOf(forecast);
  const credential = await credentialFor(payer, forecast);
  const original = decode(credential);
  const before = await snapshot(payer, merchant);
  const cases: Array<[string, string, number, string]> = [
    ['another payment method', formatAuthorizationPayment({ ...original, challenge: { ...original.challenge, method: 'tempo' } }), 400, 'method-unsupported'],
    ['another intent', formatAuthorizationPayment({ ...original, challenge: { ...original.challenge, intent: 'session' } }), 400, 'method-unsupported'],
    ['the opaque of another 402', formatAuthorizationPayment({ ...original, challenge: { ...original.challenge, opaque: (await challengeOf(forecast)).opaque as string } }), 402, 'invalid-challenge'],
    ['a nonce not bound to the challenge', formatAuthorizationPayment({ ...original, payload: { ...original.payload, nonce: `0x${'ab'.repeat(32)}` } }), 402, 'verification-failed'],
    ['not base64url JSON', 'Payment !!!', 402, 'malformed-credential'],
  ];
  for (const [name, header, status, problem] of cases) {
    const r = await send(forecast, header);
    t.equal(r.status, status, name);
    t.equal(r.problem, problem, name);
  }
  t.same(await snapshot(payer, merchant), before, 'nothing moved, no relayer transaction, no upstream call');
});

t.test('a challenge with a valid HMAC is still refused on a route (or method) it does not name', async (t) => {
  // Challenges made with the gateway's own key: only the route binding stands between them and payment.
  const payer = await payerWith('1');
  const issued = await challengeOf(forecast);
  const request = decodeRequest(issued.request);
  if (!request.ok) throw new Error(request.error.message);
  const { merchant } = await merchantOf(forecast);
  const key = utf8(MPP_SECRET);
  const expires = new Date(Date.parse(issued.expires));
  const method = mppxEvmCharge({ account: payer, authorization: { name: stock.stablecoin.name, version: stock.stablecoin.version } });
  const credentialWith = async (opaque: string | undefined): Promise<string> => {
    const made = createChallenge(key, { realm: issued.realm, request: request.value, expires, ...(opaque !== undefined && { opaque }) });
    if (!made.ok) throw new Error(made.error.message);
    const [parsed] = Challenge.deserializeList(formatWwwAuthenticate(made.value));
    return method.createCredential({ challenge: parsed as never, context: {} as never });
  };
  const before = await snapshot(payer, merchant);
  const salt = 'AAAAAAAAAAAAAAAA';
  const cases: Array<[string, string | undefined]> = [
    ['no opaque at all', undefined],
    ['opaque naming another route', opaqueFor(routeTag('weather', 'geocode', 'GET'), salt)],
    ['opaque naming another method', opaqueFor(routeTag('weather', 'forecast', 'POST'), salt)],
    ['opaque naming another merchant', opaqueFor(routeTag('fx', 'forecast', 'GET'), salt)],
    ['a bare route tag', routeTag('weather', 'forecast', 'GET')],
  ];
  for (const [name, opaque] of cases) {
    const r = await send(forecast, await credentialWith(opaque));
    t.equal(r.status, 402, name);
    t.equal(r.problem, 'invalid-challenge', name);
  }
  t.same(await snapshot(payer, merchant), before, 'nothing moved');
  const good = await send(forecast, await credentialWith(opaqueFor(routeTag('weather', 'forecast', 'GET'), salt)));
  t.equal(good.status, 200, 'the same construction naming this route pays: the refusals above were the binding');
});

t.test('every 402 carries its own challenge: one buyer pays the same route twice at once', async (t) => {
  const ids = await Promise.all(Array.from({ length: 40 }, async () => (await challengeOf(forecast)).id));
  t.equal(new Set(ids).size, ids.length, '40 unpaid 402s, 40 distinct challenge ids (so 40 distinct EIP-3009 nonces)');
  const payer = await payerWith('1');
  const { merchant, amount } = await merchantOf(forecast);
  const before = await snapshot(payer, merchant);
  const mppx = Mppx.create({ methods: [evm({ account: payer, authorization: { name: stock.stablecoin.name, version: stock.stablecoin.version } })], polyfill: false, fetch });
  const both = await Promise.all([mppx.fetch(forecast), mppx.fetch(forecast)]);
  const statuses = await Promise.all(both.map(async (r) => [r.status, await r.text()] as const));
  t.same(
    statuses.map(([s]) => s),
    [200, 200],
    JSON.stringify(statuses.map(([, b]) => b.slice(0, 200))),
  );
  const after = await snapshot(payer, merchant);
  t.equal(after.merchant - before.merchant, 2n * amount, 'both purchases settled');
  t.equal(before.payer - after.payer, 2n * amount);
  t.equal(after.upstream - before.upstream, 2);
  t.ok(after.nonces - before.nonces >= 1 && after.nonces - before.nonces <= 2, `${after.nonces - before.nonces} relayer transactions (settlements may share a batch)`);
});

t.test('one fresh MPP credential presented 20 times at once: one settlement, one upstream call', async (t) => {
  const payer = await payerWith('1');
  const { merchant, amount } = await merchantOf(forecast);
  const credential = await credentialFor(payer, forecast);
  const before = await snapshot(payer, merchant);
  const answers = await Promise.all(Array.from({ length: 20 }, () => send(forecast, credential)));
  const served = answers.filter((a) => a.status === 200);
  t.equal(served.length, 1, `exactly one 200 (statuses: ${answers.map((a) => a.status).join(',')})`);
  t.ok(
    answers.every((a) => a.status === 200 || (a.status === 402 && a.problem === 'verification-failed')),
    'every other presentation is refused as already used',
  );
  const after = await snapshot(payer, merchant);
  t.equal(after.merchant - before.merchant, amount, 'one transfer to the merchant');
  t.equal(before.payer - after.payer, amount, 'the buyer paid once');
  t.equal(after.nonces - before.nonces, 1, 'one relayer transaction');
  t.equal(after.upstream - before.upstream, 1, 'one upstream call');
  const late = await send(forecast, credential);
  t.equal(late.status, 402, 'and later presentations get nothing');
  t.same(await snapshot(payer, merchant), after);
});
