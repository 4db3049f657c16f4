import t from 'tap';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { Mppx, evm } from 'mppx/client';
import { parseUnits, type LocalAccount } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { DEVNET_ROLES, devnetAccount, devnetPrivateKey } from '../src/devnet/accounts.ts';
import type { PaymentRequirements } from '../src/protocol/x402/types.ts';
import { DEVNET_UPSTREAM_SECRET } from '../src/cli/service.ts';
import { startFixtureUpstreams } from '../src/devnet/fixtures/server.ts';
import { verifyReceipt } from '../src/protocol/mpp/receipt.ts';
import { clientsFor, freshAccount, network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { transfersTo } from './helpers/ledger.ts';
import { fundedPayer, officialPayment, stableBalance } from './helpers/payments.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';

const manifest = testDevnet();
const funder = tester('gateway');
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0, faults: true });
t.teardown(() => fixtures.close());
const upstreamOrigin = new URL(fixtures.baseUrlFor('catjoke')).origin;
const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: TEST_MANIFEST_PATH,
  env: {
    GATE402_RELAYER_KEYS: [8, 9].map((slot) => devnetPrivateKey(DEVNET_ROLES.testers[slot] as number)).join(','),
    GATE402_CATALOG_UPSTREAM_BASE: upstreamOrigin,
    GATE402_BREAKER_THRESHOLD: '2',
    GATE402_BREAKER_OPEN_MS: '3000',
  },
});
t.teardown(() => gw.stop());
const route = '/m/catjoke/joke';
const query = 'params%5Btopic%5D=naps&lang=en';
const url = `${gw.url}${route}?${query}`;

/** Every response a buyer saw in this file: none may name the upstream or carry its secret. */
const seen: Array<{ headers: string; body: string }> = [];
async function look(res: Response): Promise<{ status: number; headers: Headers; text: string }> {
  const text = await res.text();
  seen.push({ headers: JSON.stringify([...res.headers]), body: text });
  return { status: res.status, headers: res.headers, text };
}

/** fetch that remembers the payment headers it sent, so credentials can be replayed. */
function recordingFetch(sent: Array<Record<string, string>>): typeof fetch {
  return async (input, init) => {
    const req = new Request(input as Parameters<typeof fetch>[0], init);
    const h: Record<string, string> = {};
    for (const name of ['payment-signature', 'authorization']) {
      const v = req.headers.get(name);
      if (v) h[name] = v;
    }
    sent.push(h);
    return fetch(req);
  };
}

function x402Buyer(payer: LocalAccount, caip2: string, sent: Array<Record<string, string>>) {
  const client = registerExactEvmScheme(
    x402Client.fromConfig({ schemes: [], spendControls: false, paymentRequirementsSelector: (_v, offers) => offers.find((o) => o.network === caip2) ?? (offers[0] as (typeof offers)[number]) }),
    { signer: payer },
  );
  return wrapFetchWithPayment(recordingFetch(sent), client);
}

async function directUpstreamBody(): Promise<string> {
  const res = await fetch(`${fixtures.baseUrlFor('catjoke')}/joke?${query}`, { headers: { 'x-api-key': DEVNET_UPSTREAM_SECRET } });
  return res.text();
}

let merchant: `0x${string}` = '0x0000000000000000000000000000000000000000';
/**
 * What `payer` (a fresh buyer of this test) transferred to `to`, transfer by transfer: the built-in merchants are
 * paid by other test files on the shared devnet at the same time, so their balance's change is not this test's alone.
 */
const paidBy = async (n: Parameters<typeof transfersTo>[0], to: `0x${string}`, payer: { address: `0x${string}` }): Promise<bigint[]> =>
  (await transfersTo(n, to, [payer.address], 0n)).get(payer.address.toLowerCase()) ?? [];

t.test('without payment: 402 with both challenges', async (t) => {
  const res = await look(await fetch(url));
  t.equal(res.status, 402);
  t.match(res.headers.get('content-type'), /application\/problem\+json/);
  t.equal(res.headers.get('cache-control'), 'no-store');
  const required = decodePaymentRequiredHeader(res.headers.get('payment-required') as string);
  t.equal(required.x402Version, 2);
  const first = required.accepts[0];
  t.same([first?.network, first?.amount, first?.extra?.assetTransferMethod], [CAIP2.stockChain, '10000', 'permit2'], 'Permit2 with stablecoin B first');
  const networks = [CAIP2.base, CAIP2.baseSepolia, CAIP2.stockChain].sort();
  const exact = required.accepts.filter((a) => a.scheme === 'exact');
  t.same(exact.map((a) => a.network).sort(), networks, 'one exact offer per accepted network');
  // The route takes payment channels too (the built-in catalog's channel routes): their offers come after every exact one.
  const channels = required.accepts.filter((a) => (a.scheme as string) === 'batch-settlement');
  t.same(channels.map((a) => a.network).sort(), networks, 'one channel offer per accepted network');
  t.same(required.accepts.slice(0, exact.length), exact, 'exact offers first');
  merchant = first?.payTo as `0x${string}`;
  t.match(res.headers.get('www-authenticate'), /^Payment id="[^"]+", realm="[^"]+", method="evm", intent="charge", request="[^"]+", expires="[^"]+"/);
  const problem = JSON.parse(res.text) as { type: string; status: number; challengeId: string };
  t.same([problem.type, problem.status], ['https://paymentauth.org/problems/payment-required', 402]);
});

for (const caip2 of [CAIP2.stockChain, CAIP2.base]) {
  t.test(`@x402/fetch pays on ${caip2}; the body is the upstream's, byte for byte; a replay gets nothing`, async (t) => {
    const n = network(manifest, caip2);
    const payer = await fundedPayer(n, caip2, funder, parseUnits('1', 6));
    const sent: Array<Record<string, string>> = [];
    const callsBefore = fixtures.calls;
    const res = await look(await x402Buyer(payer, caip2, sent)(url));
    t.equal(res.status, 200, res.text);
    t.equal(res.text, await directUpstreamBody(), 'the upstream body, verbatim');
    t.equal(fixtures.calls - callsBefore, 2, 'one upstream call for the paid request (plus the direct comparison)');
    const settlement = decodePaymentResponseHeader(res.headers.get('payment-response') as string);
    t.equal(settlement.success, true);
    t.equal(settlement.network, caip2);
    t.same(await paidBy(n, merchant, payer), [10_000n], 'exactly the price reached the merchant, in one transfer');
    t.equal(await stableBalance(n, payer.address), 990_000n, 'and left the buyer');
    t.equal(res.headers.get('x-powered-by'), null, 'identifying upstream headers are stripped');
    t.notMatch(res.headers.get('server') ?? '', /fixture/);

    const credential = sent.find((h) => h['payment-signature'])?.['payment-signature'];
    t.ok(credential, 'the client sent PAYMENT-SIGNATURE');
    const callsAfter = fixtures.calls;
    const replay = async () => look(await fetch(url, { headers: { 'payment-signature': credential as string } }));
    const again = await replay();
    t.equal(again.status, 402, 'replaying the credential is refused');
    const burst = await Promise.all(Array.from({ length: 20 }, replay));
    t.ok(
      burst.every((r) => r.status === 402),
      '20 concurrent replays are refused',
    );
    t.equal(fixtures.calls, callsAfter, 'no second upstream call');
    t.same(await paidBy(n, merchant, payer), [10_000n], 'no second transfer');
  });
}

t.test('mppx pays over MPP: 200 with a Payment-Receipt whose signature checks; a replay gets nothing', async (t) => {
  const n = network(manifest, CAIP2.stockChain);
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6), { approvePermit2: false });
  const sent: Array<Record<string, string>> = [];
  const mppx = Mppx.create({ methods: [evm({ account: payer, authorization: { name: n.stablecoin.name, version: n.stablecoin.version } })], polyfill: false, fetch: recordingFetch(sent) });
  const res = await look(await mppx.fetch(url));
  t.equal(res.status, 200, res.text);
  t.equal(res.text, await directUpstreamBody());
  const signer = ((await (await fetch(`${gw.url}/.well-known/gate402`)).json()) as { receiptSigner: string }).receiptSigner;
  const receipt = await verifyReceipt(res.headers.get('payment-receipt') as string, signer);
  t.ok(receipt.ok, `the receipt is signed by the gateway (${JSON.stringify(receipt)})`);
  t.same(await paidBy(n, merchant, payer), [10_000n], 'exactly the price, by EIP-3009');
  if (receipt.ok) t.match(receipt.value.reference, /^0x[0-9a-f]{64}$/);

  const credential = sent.find((h) => h.authorization)?.authorization;
  t.ok(credential);
  const callsAfter = fixtures.calls;
  const burst = await Promise.all(Array.from({ length: 21 }, async () => look(await fetch(url, { headers: { authorization: credential as string } }))));
  t.ok(
    burst.every((r) => r.status === 402),
    'replays are refused',
  );
  t.equal(fixtures.calls, callsAfter, 'no second upstream call');
  t.same(await paidBy(n, merchant, payer), [10_000n], 'no second transfer');
});

t.test('malformed payment headers get 400/402 problem JSON, never a 500', async (t) => {
  const cases: Array<Record<string, string>> = [
    { 'payment-signature': 'not base64 at all!!' },
    { 'payment-signature': Buffer.from('{"x402Version":2').toString('base64') },
    { 'payment-signature': Buffer.from(JSON.stringify({ x402Version: 2, accepted: {}, payload: {} })).toString('base64') },
    { 'payment-signature': 'A'.repeat(40_000) },
    { authorization: 'Payment !!!' },
    { authorization: `Payment ${Buffer.from('{"challenge":{}}').toString('base64url')}` },
  ];
  for (const headers of cases) {
    const res = await look(await fetch(url, { headers }));
    t.ok([400, 402, 413, 431].includes(res.status), `${JSON.stringify(headers).slice(0, 60)} -> ${res.status}`);
    if (res.status === 400 || res.status === 402) t.doesNotThrow(() => JSON.parse(res.text), 'a JSON body');
  }
  const unknown = await look(await fetch(`${gw.url}/m/no-such-merchant/x`));
  t.equal(unknown.status, 404);
});

t.test('a failing upstream: 502 with the settlement; replays of one credential cannot open the breaker; two buyers can; nobody pays while it is open; it closes again', async (t) => {
  const n = network(manifest, CAIP2.stockChain);
  const { pub } = clientsFor(n, funder);
  const relayers = [8, 9].map((slot) => devnetAccount(DEVNET_ROLES.testers[slot] as number).address);
  const relayerTxs = async () => Promise.all(relayers.map((address) => pub.getTransactionCount({ address, blockTag: 'pending' })));
  const fx = `${gw.url}/m/fx/latest?base=EUR`;
  const failing = `${fx}&fixture_status=500`;
  const unpaid = await look(await fetch(fx));
  t.equal(unpaid.status, 402);
  const required = decodePaymentRequiredHeader(unpaid.headers.get('payment-required') as string);
  const offer = required.accepts.find((a) => a.network === CAIP2.stockChain) as PaymentRequirements;
  const fxMerchant = offer.payTo as `0x${string}`;
  const paidWith = async (credential: string, at = failing) => look(await fetch(at, { headers: { 'payment-signature': credential } }));
  const buyOnce = async (payer: LocalAccount) => {
    const sent: Array<Record<string, string>> = [];
    const res = await look(await x402Buyer(payer, CAIP2.stockChain, sent)(failing));
    return { res, credential: sent.find((h) => h['payment-signature'])?.['payment-signature'] as string };
  };

  // A buyer whose input makes the upstream fail pays once, then replays the credential again and again.
  const a = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6));
  let calls = fixtures.calls;
  const first = await buyOnce(a);
  t.equal(first.res.status, 502, 'the upstream failed after the payment settled');
  const body = JSON.parse(first.res.text) as { transaction: string; network: string };
  t.match(body.transaction, /^0x[0-9a-f]{64}$/, 'the buyer holds the settlement transaction');
  t.equal(decodePaymentResponseHeader(first.res.headers.get('payment-response') as string).transaction, body.transaction);
  t.equal(fixtures.calls - calls, 1, 'one upstream call');
  calls = fixtures.calls;
  for (let i = 0; i < 6; i++) t.equal((await paidWith(first.credential)).status, 502, `replay ${i + 1}: the same credential may retry, and fails again`);
  t.equal(fixtures.calls - calls, 6, 'each retry reached the upstream once');
  t.equal(await stableBalance(n, a.address), 995_000n, 'charged once: 0.005 USD');
  t.same(await paidBy(n, fxMerchant, a), [5_000n], 'the merchant was paid once');
  t.equal((await look(await fetch(fx))).status, 402, 'seven failures of one credential count once: the breaker (threshold 2) is still closed for everyone');

  // A second, distinct paid failure opens it.
  const b = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6));
  t.equal((await buyOnce(b)).res.status, 502);
  const open = await look(await fetch(fx));
  t.equal(open.status, 503, 'two buyers failing: refused before payment');
  t.ok(Number(open.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.equal(open.headers.get('payment-required'), null, 'and no challenge to pay');
  t.equal((await look(await fetch(url))).status, 402, 'other merchants are unaffected');

  // A paid credential arriving while the breaker is open (its offer read before) is not charged.
  const c = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6));
  const late = encodePaymentSignatureHeader({ ...(await officialPayment(c, offer)), resource: required.resource } as never);
  const txsBefore = await relayerTxs();
  calls = fixtures.calls;
  const refused = await paidWith(late, fx);
  t.equal(refused.status, 503, 'a paid request while open: 503');
  t.match(refused.text, /nothing was charged/);
  t.equal(await stableBalance(n, c.address), 1_000_000n, 'the buyer was not charged');
  t.same(await paidBy(n, fxMerchant, c), [], 'the merchant received nothing');
  t.same(await relayerTxs(), txsBefore, 'no relayer sent a transaction');
  t.equal(fixtures.calls, calls, 'the upstream was not called');

  // Once open long enough, one trial goes through: the upstream has recovered (no failing input), it succeeds and
  // the breaker closes.
  for (let status = 503; status === 503; ) {
    await new Promise((r) => setTimeout(r, 250));
    status = (await look(await fetch(fx))).status;
  }
  const trial = await paidWith(late, fx);
  t.equal(trial.status, 200, `the trial is served: ${trial.text}`);
  t.equal(await stableBalance(n, c.address), 995_000n, 'and charged once');
  t.equal((await look(await fetch(fx))).status, 402, 'the breaker is closed again');

  // The first buyer's credential, whose calls failed, still buys its one answer, without paying again.
  calls = fixtures.calls;
  const recovered = await paidWith(first.credential, fx);
  t.equal(recovered.status, 200, `a successful retry after recovery: ${recovered.text}`);
  t.equal(fixtures.calls - calls, 1, 'one upstream call');
  t.equal(await stableBalance(n, a.address), 995_000n, 'not charged again');
  t.equal((await paidWith(first.credential, fx)).status, 402, 'and now it is spent');
  t.same(await Promise.all([a, b, c].map((buyer) => paidBy(n, fxMerchant, buyer))), [[5_000n], [5_000n], [5_000n]], 'the merchant was paid three times, once per buyer');
});

t.test('served discovery documents validate as OpenAPI 3.1 and price the catalog', async (t) => {
  const { default: SwaggerParser } = await import('@apidevtools/swagger-parser');
  for (const path of ['/openapi.json', '/m/catjoke/openapi.json']) {
    const doc = (await (await fetch(`${gw.url}${path}`)).json()) as { openapi: string; paths: Record<string, Record<string, { 'x-payment-info'?: { amount: string } }>> };
    t.equal(doc.openapi, '3.1.0');
    await t.resolves(SwaggerParser.validate(structuredClone(doc) as never), `${path} validates`);
    t.equal(doc.paths['/m/catjoke/joke']?.get?.['x-payment-info']?.amount, '10000');
  }
  const wk = (await (await fetch(`${gw.url}/.well-known/x402`)).json()) as { version: number; resources: string[] };
  t.equal(wk.version, 1);
  t.ok(wk.resources.length >= 40);
});

t.test('a merchant registers itself with a wallet signature and is paid through the gateway', async (t) => {
  const { registrationTypedData } = await import('../src/gateway/merchants/signature.ts');
  const owner = freshAccount();
  const registration = {
    action: 'register' as const,
    slug: `shop-${Date.now().toString(36)}`,
    name: 'A test shop',
    description: 'Registered by the gateway test',
    payTo: owner.address,
    networks: [CAIP2.stockChain],
    upstream: { kind: 'url' as const, baseUrl: fixtures.baseUrlFor('catjoke'), secretHeaders: { 'x-api-key': 'shop-secret-value' } },
    routes: [{ route: 'joke', methods: ['GET' as const], priceUsd: '0.020000', summary: 'A joke', description: 'A joke, paid', input: 'none' }],
    nonce: `n-${Math.random()}`,
    issuedAt: Math.floor(Date.now() / 1000),
  };
  const signature = await owner.signTypedData(registrationTypedData(registration as never));
  const forged = await freshAccount().signTypedData(registrationTypedData(registration as never));
  const refused = await look(await fetch(`${gw.url}/api/merchants`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ registration, signature: forged }) }));
  t.equal(refused.status, 403, 'a signature by another wallet is refused');
  const created = await look(await fetch(`${gw.url}/api/merchants`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ registration, signature }) }));
  t.ok([200, 201].includes(created.status), created.text);
  t.notMatch(created.text, /shop-secret-value|127\.0\.0\.1/, 'the answer shows neither the secret nor the upstream');

  const n = network(manifest, CAIP2.stockChain);
  const payer = await fundedPayer(n, CAIP2.stockChain, funder, parseUnits('1', 6));
  const res = await look(await x402Buyer(payer, CAIP2.stockChain, [])(`${gw.url}/m/${registration.slug}/joke`));
  t.equal(res.status, 200, res.text);
  t.equal(await stableBalance(n, owner.address), 20_000n, 'the new merchant was paid its own price');
  t.notOk(res.text.includes('shop-secret-value'));
});

t.test('no response to a buyer named the upstream or carried its secret', async (t) => {
  const port = new URL(upstreamOrigin).port;
  t.ok(seen.length > 50, `${seen.length} responses looked at`);
  for (const r of seen) {
    t.notOk(r.headers.includes(DEVNET_UPSTREAM_SECRET) || r.body.includes(DEVNET_UPSTREAM_SECRET), 'no secret');
    t.notOk(r.headers.includes(`:${port}`) || r.body.includes(`:${port}`), 'no upstream origin');
  }
});
