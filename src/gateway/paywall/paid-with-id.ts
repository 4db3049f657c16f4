/**
 * A payment through a door whose credentials carry x402 payment identifiers (see `payment-ids.ts`): a route that
 * requires an id refuses a payment without one (400); the same id with the same request and terms gets the recorded
 * answer, or runs on the payment first bound to the id (never settling this one too); with anything else, 409.
 */
import type { HttpResponse } from '../../http/server.ts';
import { boundMethod } from '../../protocol/mpp/binding.ts';
import { paymentIdentifierOf } from '../../protocol/x402/extensions/payment-identifier.ts';
import { schemeOfPayload } from '../../schemes/registry.ts';
import { fingerprintOf, nonceKeyOf } from '../../schemes/payment-identity.ts';
import { codedRefusal, json, replayed } from './answers.ts';
import { paid } from './paid-route.ts';
import { refused, SIGNATURE_REASONS, type Purchase } from './paid-steps.ts';
import { encodeAnswer, paymentIdFingerprint, paymentIdKey, type PaymentIds } from './payment-ids.ts';

type Turn = Awaited<ReturnType<PaymentIds['turn']>>;

export async function paidWithId(p: Purchase): Promise<HttpResponse> {
  const { deps, req, credential } = p;
  const payment = credential.request.paymentPayload;
  const pid = paymentIdentifierOf(payment);
  if (pid.kind === 'invalid') return codedRefusal('invalid_payment_identifier', pid.message, 400);
  if (pid.kind === 'none') {
    if (p.route.requirePaymentId !== true) return paid(p);
    const message = "this route requires a payment identifier: add extensions['payment-identifier'].info.id (16 to 128 letters, digits, '-' or '_') to the payment";
    return codedRefusal('payment_identifier_required', message, 400);
  }
  // A credential whose signature is not the payer's learns nothing of the payer's identifiers (the store is not asked
  // whether its id is bound, used or in progress: a forged one would tell which ids a victim used), and, as in
  // `paid`, is refused before its body is read.
  const verdict = await deps.settlement.verify(credential.request);
  if (!verdict.isValid && SIGNATURE_REASONS.has(verdict.invalidReason ?? '')) return refused(p, `payment refused: ${verdict.invalidReason}`);
  const body = req.method === 'POST' ? await req.body() : undefined;
  let payer: string;
  try {
    payer = schemeOfPayload(payment.payload).payer(payment.payload);
  } catch {
    return codedRefusal('malformed-credential', 'PAYMENT-SIGNATURE: the payload is of no known scheme', 400);
  }
  const fingerprint = paymentIdFingerprint({
    merchant: p.merchant.slug,
    route: p.route.route,
    method: boundMethod(req.method),
    path: req.path,
    query: req.query,
    body,
    accepted: credential.request.paymentRequirements,
  });
  const turn = await deps.stores.paymentIds.turn(paymentIdKey(payer, pid.id), fingerprint, credential.request);
  if (turn.kind === 'conflict') return json(409, { error: turn.message, code: 'payment_identifier_conflict' });
  if (turn.kind === 'busy') return json(409, { error: turn.message, code: 'payment_identifier_in_progress' }, { 'retry-after': '1' });
  if (turn.kind === 'gone') return json(410, { error: turn.message, code: 'payment_identifier_answer_not_kept' });
  const notThePayers = await boundElsewhere(p, turn);
  if (notThePayers) return notThePayers;
  if (turn.kind === 'replay') return replayed(turn.answer);
  return runTurn(p, turn);
}

/**
 * A request on a payment bound earlier brings a payment of its own: it must be the payer's, valid now, though it is
 * never settled (else anyone knowing a payer's id could collect the payer's answer). Its refusal, or undefined.
 */
async function boundElsewhere(p: Purchase, turn: Extract<Turn, { kind: 'run' | 'replay' }>): Promise<HttpResponse | undefined> {
  const bound = turn.kind === 'replay' ? turn.bound : turn.request;
  if (fingerprintOf(bound) === fingerprintOf(p.credential.request)) return undefined;
  const verdict = await p.deps.settlement.verify(p.credential.request);
  if (verdict.isValid) return undefined;
  if (turn.kind === 'run') await turn.finish('charged').catch((err: unknown) => p.deps.log.error('could not free a payment identifier', { error: err }));
  return refused(p, `payment refused: ${verdict.invalidReason ?? 'invalid'}`);
}

/** The identifier's turn: paid on the payment bound to it, its answer recorded before it is marked served. */
async function runTurn(p: Purchase, turn: Extract<Turn, { kind: 'run' }>): Promise<HttpResponse> {
  const { deps } = p;
  let charged = false;
  let served = false;
  try {
    return await paid(
      { ...p, credential: { ...p.credential, request: turn.request }, key: nonceKeyOf(turn.request) },
      {
        signatureChecked: true,
        onCharged: () => {
          charged = true;
        },
        beforeServed: async (response) => {
          served = true;
          const answer = encodeAnswer(response.status, response.headers ?? {}, response.body, deps.stores.paymentIds.policy.maxBodyBytes);
          await turn.record(answer).catch((err: unknown) => deps.log.error('could not record the answer to a payment identifier', { error: err }));
        },
      },
    );
  } finally {
    await turn.finish(served ? 'served' : charged ? 'charged' : 'not-charged').catch((err: unknown) => deps.log.error('could not release a payment identifier', { error: err }));
  }
}
