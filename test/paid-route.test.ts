/**
 * The paid route alone, with fake ports (test/support/paid-route-harness.ts): a fake settlement, an in-process
 * upstream that counts its calls, a logical clock, LMDB stores in a temp directory. No chain, no spawned process.
 * Each branch of a paid request, as a buyer sees it: status, headers that decode, and whether the upstream was
 * called and the payment settled.
 */
import { Mppx, evm } from 'mppx/client';
import t from 'tap';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { parseWwwAuthenticate } from '../src/protocol/mpp/www-authenticate.ts';
import { upstreamFailed } from '../src/ports/upstream.ts';
import { ok } from '../src/protocol/result.ts';
import { verifyReceipt } from '../src/protocol/mpp/receipt.ts';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '../src/protocol/x402/headers.ts';
import { bodyOf, gate, harness, headersOf, offerOf, RECEIPT_KEY, request, settledAnswer, x402Headers, x402Payment } from './support/paid-route-harness.ts';
import { VOUCHER_HEADER, voucherDoor, voucherFor } from './support/voucher-door.ts';

const PAYMENT_ID = { 'payment-identifier': { info: { id: 'order_0123456789abcdef' } } };

t.test('unpaid: one 402 carrying the x402 offers and a fresh MPP challenge; nothing is called', async (t) => {
  const h = harness(t);
  const first = await h.handle(request('GET'));
  const second = await h.handle(request('GET'));
  t.equal(first.status, 402);
  const headers = headersOf(first);
  const required = decodePaymentRequiredHeader(headers['payment-required'] as string);
  t.ok(required.ok, 'PAYMENT-REQUIRED decodes');
  if (required.ok) t.same([required.value.resource.url, required.value.accepts[0]?.amount], ['https://gateway.test/m/shop/joke', '10000'], 'offers the route at its price');
  const challenges = parseWwwAuthenticate(headers['www-authenticate'] as string);
  t.ok(challenges.ok, 'WWW-Authenticate decodes');
  const body = JSON.parse(bodyOf(first)) as { challengeId: string; detail: string; type: string };
  if (challenges.ok) t.equal(challenges.value[0]?.id, body.challengeId, 'the body names the MPP challenge of the header');
  t.equal(body.detail, 'A joke: 0.010000 USD. Pay with x402 (PAYMENT-SIGNATURE) or MPP (Authorization: Payment).');
  t.not(JSON.parse(bodyOf(second)).challengeId, body.challengeId, 'each 402 has its own challenge');
  t.equal(first.headers, second.headers, 'the frozen headers are shared within the second (the memo)');
  t.same(h.challenges, ['x402', 'mpp', 'x402', 'mpp'], 'each door counts its challenge per 402');
  t.same([h.upstream.calls, h.settlement.settleCalls], [0, 0], 'neither the upstream nor settlement was asked');
});

t.test('paid with x402: 200, the upstream called once, PAYMENT-RESPONSE decodes; the credential buys one call', async (t) => {
  const h = harness(t);
  const payment = await x402Payment(h);
  const answer = await h.handle(request('GET', x402Headers(payment)));
  t.equal(answer.status, 200);
  t.equal(bodyOf(answer), 'a joke');
  const response = decodePaymentResponseHeader(headersOf(answer)['payment-response'] as string);
  t.ok(response.ok && response.value.success, 'PAYMENT-RESPONSE: settled');
  t.same([h.upstream.calls, h.settlement.settleCalls, h.settlement.charges], [1, 1, 1]);
  const records = await h.records();
  t.same(
    records.map((r) => [r.protocol, r.upstreamStatus, r.amount]),
    [['x402', 200, '10000']],
    'the paid request is recorded',
  );
  const again = await h.handle(request('GET', x402Headers(payment)));
  t.equal(again.status, 402, 'the same credential again: 402');
  t.match(JSON.parse(bodyOf(again)), { type: /verification-failed$/, detail: 'this payment has already been used for a request' });
  t.equal(h.upstream.calls, 1, 'the upstream was not called again');
});

t.test('paid with MPP: 200 with a signed Payment-Receipt', async (t) => {
  const h = harness(t);
  const payer = privateKeyToAccount(generatePrivateKey());
  const unpaid = await h.handle(request('GET'));
  const mppx = Mppx.create({ methods: [evm({ account: payer, authorization: { name: 'USD Coin', version: '2' } })], polyfill: false });
  const authorization = await mppx.createCredential(new Response(bodyOf(unpaid), { status: 402, headers: headersOf(unpaid) }));
  const answer = await h.handle(request('GET', { authorization }));
  t.equal(answer.status, 200);
  const receipt = headersOf(answer)['payment-receipt'];
  const verified = await verifyReceipt(receipt as string, privateKeyToAccount(RECEIPT_KEY).address);
  t.ok(verified.ok, 'the receipt is signed by the gateway');
  t.same([h.upstream.calls, h.settlement.charges, (await h.records())[0]?.protocol], [1, 1, 'mpp']);
  // Both credentials at once: x402 comes first, as before.
  const both = await h.handle(request('GET', { authorization, ...x402Headers(await x402Payment(h)) }));
  t.equal(both.status, 200, 'a request with both is read by the x402 door');
  t.ok(headersOf(both)['payment-response'], 'and answered with PAYMENT-RESPONSE');
});

t.test('refused: 402, the upstream never called', async (t) => {
  const h = harness(t);
  h.settlement.answer = (req) => ({ success: false, errorReason: 'invalid_exact_evm_payload_signature', transaction: '', network: req.paymentRequirements.network });
  const answer = await h.handle(request('GET', x402Headers(await x402Payment(h))));
  t.equal(answer.status, 402);
  t.match(JSON.parse(bodyOf(answer)), { type: /verification-failed$/, detail: 'payment refused: invalid_exact_evm_payload_signature' });
  const response = decodePaymentResponseHeader(headersOf(answer)['payment-response'] as string);
  t.ok(response.ok && !response.value.success, 'PAYMENT-RESPONSE says it did not settle');
  t.ok(headersOf(answer)['www-authenticate'], 'with a fresh MPP challenge to pay again');
  // A payment for another amount is refused by the door, before settlement is asked.
  const cheap = await x402Payment(h);
  const other = await h.handle(request('GET', x402Headers({ ...cheap, accepted: { ...cheap.accepted, amount: '1' } })));
  t.equal(other.status, 402);
  t.match(JSON.parse(bodyOf(other)), { type: /payment-insufficient$/ });
  t.same([h.upstream.calls, h.settlement.settleCalls], [0, 1], 'upstream never called; the door refusal never reached settlement');
});

t.test('shed: 503 with Retry-After, settle never called', async (t) => {
  const h = harness(t);
  h.settlement.shed = { reason: 'queue_full', retryAfterSeconds: 7 };
  const answer = await h.handle(request('GET', x402Headers(await x402Payment(h))));
  t.equal(answer.status, 503);
  t.equal(headersOf(answer)['retry-after'], '7');
  t.same(JSON.parse(bodyOf(answer)), {
    error: 'settlement is behind right now; nothing was charged',
    reason: 'queue_full',
    retry: 'send the same request with the same credential after Retry-After seconds',
  });
  t.same([h.upstream.calls, h.settlement.settleCalls], [0, 0]);
});

t.test('breaker open: 503 before anything is paid; half-open: one trial, whose success closes it', async (t) => {
  const h = harness(t, { breaker: { threshold: 1, openMs: 10_000 } });
  h.upstream.answer = async () => ok({ status: 500, headers: {}, body: new Uint8Array(0), latencyMs: 1 });
  t.equal((await h.handle(request('GET', x402Headers(await x402Payment(h))))).status, 502, 'a failing upstream: 502');
  t.equal(h.breakers.state('shop'), 'open');
  const settles = h.settlement.settleCalls;
  const upstreamCalls = h.upstream.calls;
  const closed = await h.handle(request('GET', x402Headers(await x402Payment(h))));
  t.equal(closed.status, 503);
  t.same(JSON.parse(bodyOf(closed)), { error: "merchant 'shop' is unavailable right now; nothing was charged" });
  t.equal(headersOf(closed)['retry-after'], '10');
  t.equal((await h.handle(request('GET'))).status, 503, 'an unpaid request too');
  t.same([h.settlement.settleCalls, h.upstream.calls], [settles, upstreamCalls], 'neither settlement nor the upstream was asked');

  h.clock.ms += 10_000;
  t.equal(h.breakers.state('shop'), 'half-open');
  t.equal((await h.handle(request('GET'))).status, 402, 'half-open: an unpaid request gets its 402 and gives the trial back');
  const upstream = gate();
  h.upstream.answer = async () => {
    await upstream.promise;
    return ok({ status: 200, headers: {}, body: Buffer.from('ok'), latencyMs: 1 });
  };
  const trial = h.handle(request('GET', x402Headers(await x402Payment(h))));
  while (h.upstream.inFlight === 0) await new Promise((r) => setImmediate(r));
  const second = await h.handle(request('GET', x402Headers(await x402Payment(h))));
  t.equal(second.status, 503, 'a second paid request while the trial runs: 503');
  upstream.open();
  t.equal((await trial).status, 200, 'the trial is served');
  t.equal(h.breakers.state('shop'), 'closed', 'and closes the breaker');
  t.equal(h.upstream.maxInFlight, 1, 'one trial at a time');
});

t.test('pending: 202 naming the transaction, the upstream not called', async (t) => {
  const h = harness(t);
  h.settlement.answer = (req) => ({ success: false, status: 'pending', transaction: `0x${'ab'.repeat(32)}`, network: req.paymentRequirements.network });
  const answer = await h.handle(request('GET', x402Headers(await x402Payment(h))));
  t.equal(answer.status, 202);
  t.match(JSON.parse(bodyOf(answer)), { status: 'pending', transaction: `0x${'ab'.repeat(32)}` });
  const response = decodePaymentResponseHeader(headersOf(answer)['payment-response'] as string);
  t.ok(response.ok && response.value.status === 'pending', 'PAYMENT-RESPONSE: pending');
  t.equal(h.upstream.calls, 0);
});

t.test('payment identifier: a repeat gets the same answer, replayed, settled once', async (t) => {
  const h = harness(t);
  const payment = await x402Payment(h, PAYMENT_ID);
  const first = await h.handle(request('GET', x402Headers(payment)));
  const again = await h.handle(request('GET', x402Headers(payment)));
  t.same([first.status, again.status], [200, 200]);
  t.equal(bodyOf(again), bodyOf(first), 'the same body');
  t.equal(headersOf(again)['payment-response'], headersOf(first)['payment-response'], 'the same PAYMENT-RESPONSE');
  t.equal(headersOf(again)['idempotent-replayed'], 'true', 'marked as a replay');
  t.equal(headersOf(first)['idempotent-replayed'], undefined, 'the first is not');
  t.same([h.settlement.settleCalls, h.upstream.calls], [1, 1], 'settled once, called once');
});

t.test('the upstream fails after settlement: 502 with the transaction; the credential is redeemed later, charged once', async (t) => {
  const h = harness(t);
  let fail = true;
  h.upstream.answer = async () => (fail ? upstreamFailed('connection reset', 1) : ok({ status: 200, headers: {}, body: Buffer.from('late joke'), latencyMs: 1 }));
  const payment = await x402Payment(h);
  const failed = await h.handle(request('GET', x402Headers(payment)));
  t.equal(failed.status, 502);
  const transaction = settledAnswer({ paymentPayload: payment, paymentRequirements: offerOf(await h.handle(request('GET'))), x402Version: 2 }).transaction;
  t.match(JSON.parse(bodyOf(failed)), { error: 'the merchant upstream failed after your payment settled', transaction });
  fail = false;
  h.clock.ms += 1; // the records are ordered by time
  const redeemed = await h.handle(request('GET', x402Headers(payment)));
  t.equal(redeemed.status, 200, 'the same credential, again: served');
  t.equal(bodyOf(redeemed), 'late joke');
  t.same([h.upstream.calls, h.settlement.charges], [2, 1], 'called twice, charged once');
  t.same(
    (await h.records()).map((r) => r.upstreamStatus),
    ['failed', 200],
  );
});

t.test('a third way to pay is one door: its challenge is in the 402, its credential is settled and served', async (t) => {
  const h = harness(t, { doors: (defaults) => [...defaults, voucherDoor()] });
  const unpaid = await h.handle(request('GET'));
  t.equal(unpaid.status, 402);
  const headers = headersOf(unpaid);
  t.match(headers['voucher-offer'], /^eip155:8453 10000 0x/, 'the voucher offer is in the 402');
  t.ok(headers['payment-required'] && headers['www-authenticate'], 'beside the x402 and MPP challenges');
  t.match(JSON.parse(bodyOf(unpaid)).detail, /Pay with x402 \(PAYMENT-SIGNATURE\), MPP \(Authorization: Payment\) or a voucher \(Voucher\)\.$/);
  const voucher = voucherFor(await x402Payment(h));
  const answer = await h.handle(request('GET', { [VOUCHER_HEADER]: voucher }));
  t.equal(answer.status, 200);
  t.match(headersOf(answer)['voucher-receipt'], /^0x[0-9a-f]{64}$/, "answered with the voucher door's receipt");
  t.same([h.upstream.calls, h.settlement.charges, (await h.records())[0]?.protocol], [1, 1, 'voucher']);
  const bad = await h.handle(request('GET', { [VOUCHER_HEADER]: '%%%' }));
  t.same([bad.status, JSON.parse(bodyOf(bad)).type.endsWith('malformed-credential')], [400, true], 'its refusals are 402 problems like the others');
});

t.test('a POST: the MPP challenge is bound to its body', async (t) => {
  const h = harness(t);
  const unpaid = await h.handle(request('POST', {}, '{"q":1}'));
  t.match(headersOf(unpaid)['www-authenticate'], /digest="sha-256=/, 'the 402 of a POST with a body binds its digest');
});
