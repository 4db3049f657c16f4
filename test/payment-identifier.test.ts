/**
 * The x402 `payment-identifier` extension against the real gateway, paid by @x402/fetch with the official extension
 * helpers: the same identifier buys one settlement and one upstream call, however often (or concurrently) it is sent,
 * and across a restart; with a different request it is refused 409; a route that requires one refuses a payment
 * without it, 400, before anything is charged.
 */
import t from 'tap';
import { rmSync } from 'node:fs';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { generatePaymentId, isPaymentIdentifierRequired, PAYMENT_IDENTIFIER } from '@x402/extensions/payment-identifier';
import { parseUnits, type LocalAccount } from 'viem';
import { CAIP2 } from '../src/chain/canonical.ts';
import { network, tester, testDevnet } from './helpers/devnet.ts';
import { startHostileUpstream } from './helpers/hostile-upstream.ts';
import { registerOwnMerchant, relayerTxCount, spawnPaidGateway, x402Fetch, type PaidGateway } from './helpers/paid-gateway.ts';
import { fundedPayer, stableBalance } from './helpers/payments.ts';
import { tempDir } from './helpers/temp-dir.ts';

const manifest = testDevnet();
const funder = tester('paymentIds');
const base = network(manifest, CAIP2.base);
const upstream = await startHostileUpstream();
t.teardown(() => upstream.close());
// Every upstream answer differs: a replayed answer is the recorded one, a second upstream call would show.
let answers = 0;
upstream.behave('/', (req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ answer: ++answers, path: req.path, random: Math.random() }));
});
const dataDir = tempDir('payment-ids');
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

/** @x402/fetch paying on Base, adding `id` (when given) with the official helper. */
const payingFetch = (payer: LocalAccount, id: string | undefined) => x402Fetch(payer, CAIP2.base, id);

const stamp = Date.now().toString(36);
let first: PaidGateway | undefined;
let gw: PaidGateway;
let optional: { slug: string; payTo: `0x${string}` };
let required: { slug: string; payTo: `0x${string}` };
let payer: LocalAccount;

t.before(async () => {
  first = await spawnPaidGateway(manifest, upstream.origin, {}, { dataDir });
  gw = first;
  optional = await registerOwnMerchant(gw.gw.url, upstream.origin, { slug: `pid-${stamp}`, priceUsd: '0.010000', networks: [CAIP2.base] });
  required = await registerOwnMerchant(gw.gw.url, upstream.origin, { slug: `pidreq-${stamp}`, priceUsd: '0.010000', networks: [CAIP2.base], requirePaymentId: true });
  payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
});
t.teardown(() => gw?.gw.stop());

const money = async (payTo: `0x${string}`) => ({ payer: await stableBalance(base, payer.address), merchant: await stableBalance(base, payTo), txs: await relayerTxCount(base, gw.relayers) });

t.test('402s declare the extension per route, as the official helpers read it', async (t) => {
  for (const [m, expected] of [
    [optional, false],
    [required, true],
  ] as const) {
    const res = await fetch(`${gw.gw.url}/m/${m.slug}/data`);
    t.equal(res.status, 402);
    const declared = decodePaymentRequiredHeader(res.headers.get('payment-required') ?? '').extensions?.[PAYMENT_IDENTIFIER];
    t.ok(declared, `${m.slug}: declared`);
    t.equal(isPaymentIdentifierRequired(declared), expected, `${m.slug}: required is ${expected}`);
  }
});

t.test('the same identifier, sent concurrently and then again: one settlement, one upstream call, the same answer', async (t) => {
  const id = generatePaymentId();
  const url = `${gw.gw.url}/m/${optional.slug}/data/once`;
  // A slow upstream, so that the three first requests overlap: one binds the identifier, the others wait for it.
  upstream.behave(`/${optional.slug}/data/once`, (req, res) => {
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ answer: ++answers, path: req.path, random: Math.random() }));
    }, 400);
  });
  t.teardown(() => upstream.behave(`/${optional.slug}/data/once`, undefined));
  const before = await money(optional.payTo);
  // @x402/fetch signs a new payment for each request, all with the same identifier.
  const concurrent = await Promise.all(Array.from({ length: 3 }, () => payingFetch(payer, id)(url)));
  const later = await payingFetch(payer, id)(url);
  const all = [...concurrent, later];
  const bodies = await Promise.all(all.map((r) => r.text()));
  t.same(
    all.map((r) => r.status),
    [200, 200, 200, 200],
    bodies.join('\n'),
  );
  t.equal(new Set(bodies).size, 1, 'one answer, recorded and replayed');
  t.equal(new Set(all.map((r) => r.headers.get('payment-response'))).size, 1, 'one settlement in PAYMENT-RESPONSE');
  t.equal(all.filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 3, 'three replays');
  t.equal(upstream.callsTo(`/${optional.slug}/data/once`), 1, 'the upstream was called once');
  const after = await money(optional.payTo);
  t.same([before.payer - after.payer, after.merchant - before.merchant, after.txs - before.txs], [10_000n, 10_000n, 1], 'one charge, one transaction');
});

t.test('the same identifier for a different request is refused 409, nothing charged', async (t) => {
  const id = generatePaymentId();
  const pay = payingFetch(payer, id);
  t.equal((await pay(`${gw.gw.url}/m/${optional.slug}/data/a`)).status, 200);
  const before = await money(optional.payTo);
  const other = await pay(`${gw.gw.url}/m/${optional.slug}/data/b`);
  t.equal(other.status, 409);
  t.match(await other.json(), { code: 'payment_identifier_conflict', error: /different request/ });
  t.equal(upstream.callsTo(`/${optional.slug}/data/b`), 0, 'the upstream was not called');
  t.same(await money(optional.payTo), before, 'nothing charged');
});

t.test('a route that requires an identifier refuses a payment without one, 400, nothing charged', async (t) => {
  const before = await money(required.payTo);
  const res = await payingFetch(payer, undefined)(`${gw.gw.url}/m/${required.slug}/data`);
  t.equal(res.status, 400);
  t.match(await res.json(), { code: 'payment_identifier_required' });
  t.equal(upstream.callsTo(`/${required.slug}/data`), 0, 'the upstream was not called');
  t.same(await money(required.payTo), before, 'nothing charged');
  const paid = await payingFetch(payer, generatePaymentId())(`${gw.gw.url}/m/${required.slug}/data`);
  t.equal(paid.status, 200, 'with an identifier it is served');
});

t.test('after a restart the identifier still gets its recorded answer, not a second charge', async (t) => {
  const id = generatePaymentId('restart_');
  const url = `${gw.gw.url}/m/${optional.slug}/data/kept`;
  const once = await payingFetch(payer, id)(url);
  const body = await once.text();
  t.equal(once.status, 200, body);
  await gw.gw.stop();
  gw = await spawnPaidGateway(manifest, upstream.origin, {}, { relayerKeys: gw.relayerKeys, relayers: gw.relayers, dataDir });
  const before = await money(optional.payTo);
  const again = await payingFetch(payer, id)(`${gw.gw.url}/m/${optional.slug}/data/kept`);
  t.equal(again.status, 200);
  t.equal(await again.text(), body, 'the recorded body');
  t.equal(upstream.callsTo(`/${optional.slug}/data/kept`), 1, 'the upstream was called once');
  t.same(await money(optional.payTo), before, 'nothing charged again');
});
