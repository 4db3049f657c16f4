/**
 * The breaker's half-open trial belongs to the request that took it: `admit` hands out a ticket released once, by
 * its holder, and no other request's release or outcome can free the trial. Without that, a request admitted while
 * the breaker was still closed could, on finishing, clear the trial of another and let a second trial through.
 */
import t from 'tap';
import { CircuitBreakers } from '../src/resilience/circuit-breaker.ts';
import { ok } from '../src/protocol/result.ts';
import type { SettleResponse } from '../src/protocol/x402/types.ts';
import { nonceKeyOf } from '../src/schemes/payment-identity.ts';
import { gate, harness, request, settledAnswer, x402Headers, x402Payment } from './support/paid-route-harness.ts';

t.test('a ticket: released once, by its holder; the trial is only its own to give back', async (t) => {
  const clock = { ms: 0 };
  const breakers = new CircuitBreakers({ threshold: 1, openMs: 1_000, now: () => clock.ms });
  const early = breakers.admit('m'); // admitted while closed
  const failing = breakers.admit('m');
  failing?.failure('payment-1');
  t.equal(breakers.state('m'), 'open');
  t.equal(breakers.admit('m'), undefined, 'open: no admission');
  clock.ms += 1_000;
  const trial = breakers.admit('m');
  t.equal(trial?.trial, true, 'half-open: the first admission is the trial');
  t.equal(breakers.admit('m'), undefined, 'and the only one');
  early?.release();
  early?.failure('payment-0');
  t.equal(breakers.admit('m'), undefined, "another ticket's release or outcome does not free the trial");
  trial?.release();
  trial?.release();
  const next = breakers.admit('m');
  t.equal(next?.trial, true, 'released by its holder, the trial goes to the next request');
  t.equal(breakers.admit('m'), undefined, 'a second release of the old ticket gave nothing more back');
  trial?.success();
  t.equal(breakers.state('m'), 'half-open', "a released ticket's outcome counts for nothing");
  next?.success();
  t.equal(breakers.state('m'), 'closed', 'the trial that succeeded closes it');
});

t.test('two concurrent requests on a half-open merchant: exactly one trial reaches the upstream', async (t) => {
  const h = harness(t, { breaker: { threshold: 1, openMs: 1_000 } });
  const settles = new Map<string, Promise<SettleResponse>>();
  h.settlement.answer = (req) => settles.get(nonceKeyOf(req)) ?? settledAnswer(req);
  const trialUpstream = gate();
  h.upstream.answer = async (req) => {
    if (req.headers['x-upstream'] === 'fail') return ok({ status: 500, headers: {}, body: new Uint8Array(0), latencyMs: 1 });
    if (req.headers['x-upstream'] === 'hang') await trialUpstream.promise;
    return ok({ status: 200, headers: {}, body: Buffer.from('ok'), latencyMs: 1 });
  };

  // A: admitted while the breaker is closed, then slow to settle.
  const slowPayment = await x402Payment(h);
  const slowSettle = gate<SettleResponse>();
  settles.set(nonceKeyOf({ x402Version: 2, paymentPayload: slowPayment, paymentRequirements: slowPayment.accepted }), slowSettle.promise);
  const slow = h.handle(request('GET', x402Headers(slowPayment)));
  // Meanwhile the upstream fails once: the breaker opens, and later lets one trial through.
  t.equal((await h.handle(request('GET', { 'x-upstream': 'fail', ...x402Headers(await x402Payment(h)) }))).status, 502);
  t.equal(h.breakers.state('shop'), 'open');
  h.clock.ms += 1_000;
  // B: the trial, whose upstream call is under way.
  const trial = h.handle(request('GET', { 'x-upstream': 'hang', ...x402Headers(await x402Payment(h)) }));
  while (h.upstream.inFlight === 0) await new Promise((r) => setImmediate(r));
  // A ends (its payment is refused) while B's trial runs.
  slowSettle.open({ success: false, errorReason: 'invalid_exact_evm_payload_signature', transaction: '', network: slowPayment.accepted.network });
  t.equal((await slow).status, 402);
  // C: a second request while the trial runs.
  const settledBefore = h.settlement.settleCalls;
  const second = await h.handle(request('GET', x402Headers(await x402Payment(h))));
  t.equal(second.status, 503, 'the second request is refused while the trial runs');
  t.equal(h.settlement.settleCalls, settledBefore, 'and never settled');
  trialUpstream.open();
  t.equal((await trial).status, 200, 'the trial is served');
  t.equal(h.upstream.maxInFlight, 1, 'exactly one trial reached the upstream at a time');
  t.equal(h.breakers.state('shop'), 'closed');
});
