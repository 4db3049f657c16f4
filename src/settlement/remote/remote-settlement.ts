/**
 * The settle and verify ports over remote x402 facilitators (`GATE402_FACILITATORS`), with failover: a network with
 * facilitators is settled by the first of them that answers, in order of preference; a network without is settled by
 * the gateway's own engine (`local`).
 *
 * A payment the gateway's own checks refuse (its terms, time window, the payment policy, a signature that neither a
 * key nor a contract wallet made) is refused here, and costs no facilitator a call; one refused because its window
 * has passed or its nonce is used may have settled before (a buyer asking again after a 202 or a 502), and is
 * answered by the chain instead.
 *
 * Never one payment settled twice. A facilitator that answers (a settlement, a refusal, or pending with its
 * transaction) is believed. One that gives no answer is passed over to the next only once the payment is proven not
 * settled by it:
 *  - nothing was sent (the connection was refused, or a 4xx refused the request before judging it): not settled;
 *  - otherwise the outcome is unknown (a timeout, a connection lost after sending, a 5xx, an answer that is not one).
 *    The same facilitator is asked again with the same payload (a gate402 facilitator answers a payment it settled,
 *    or is settling, from its record, never settling it again); failing that, the chain is read: the authorization
 *    consumed by a transfer to the payee is a settlement (answered as such, with that transaction), not consumed is
 *    proven not settled, and a chain that cannot be read leaves the outcome unknown: the buyer is told to send the
 *    same credential again, and nothing goes to the next facilitator.
 * The token's one use per nonce (EIP-3009 `authorizationState`, Permit2's nonce bitmap) stays the last guarantee: a
 * transaction a dead facilitator had broadcast but not yet seen mined can still race the next one's, and only one
 * of them moves the money (a gate402 facilitator then reports the other's transfer as the settlement).
 *
 * Each facilitator has a circuit breaker (`CircuitBreakers`, keyed by its URL): after `threshold` failed payments it
 * is passed over for `openMs`, then one payment tries it again. Concurrent settles of one payment share one attempt.
 *
 * It sheds on its own counts (`remote-admission.ts`): remote settlements in flight per network and per client are
 * bounded, and a new payment past a bound is turned away before any facilitator is called; a network without
 * facilitators is the local port's, its shedding too. It implements the `Settlement` port, and knows neither the
 * engine nor the gateway: the composition root gives it the local port and the chain-free checks.
 */
import { Agent } from 'undici';
import type { Address } from 'viem';
import type { Logger } from '../../log/logger.ts';
import type { Metrics } from '../../metrics/metrics.ts';
import { SETTLEMENT_SHED, type Settlement, type Shed } from '../../ports/settlement.ts';
import { err, ok, unchargedText, type Err, type Ok } from '../../protocol/result.ts';
import { validateSettleResponse, validateVerifyResponse } from '../../protocol/x402/schemas.ts';
import { isPermit2Payload, type SettleResponse, type VerifyRequest, type VerifyResponse } from '../../protocol/x402/types.ts';
import { CircuitBreakers, type BreakerTicket } from '../../resilience/circuit-breaker.ts';
import { fingerprintOf, nonceKeyOf } from '../../schemes/payment-identity.ts';
import { schemeOfPayload } from '../../schemes/registry.ts';
import type { Consumption } from '../../schemes/scheme.ts';
import type { PaymentRefusal } from '../../verify/checks.ts';
import { Eip3009Reason, GatewayReason, type InvalidReason, Permit2Reason } from '../../verify/reasons.ts';
import { callFacilitator, type CallOutcome } from './facilitator-call.ts';
import type { FacilitatorEndpoint, RemoteSettlementConfig } from './facilitators-config.ts';
import { RemoteAdmission } from './remote-admission.ts';

export type RemoteSettlementMetrics = Pick<Metrics, 'watchFacilitators' | 'facilitatorError' | 'facilitatorFailover' | 'paymentShed'>;

export interface RemoteSettlementDeps {
  config: RemoteSettlementConfig;
  /** Settles, verifies and sheds the networks without facilitators (the gateway's own engine). */
  local: Settlement;
  /**
   * The checks that need no chain (the engine's `precheck`): a payment they refuse is refused here, and one whose
   * signature no key made is verified locally (a contract wallet's is a chain question) before any facilitator is
   * asked. A forger's payments never reach a facilitator, its rate limits, or the breakers.
   */
  precheck(request: VerifyRequest): Promise<Ok<{ signedByKey: boolean }> | Err<PaymentRefusal>>;
  /** Whether a payment's authorization was consumed on chain, read now (undefined: its network is not configured). */
  consumption(request: VerifyRequest): Promise<Consumption | undefined>;
  log: Logger;
  metrics: RemoteSettlementMetrics;
  now?: () => number;
}

export interface RemoteSettlement extends Settlement {
  /** Remote settlements in flight now (a count, read in O(1) per network). */
  readonly inFlight: number;
  close(): Promise<void>;
}

/** What one facilitator made of a payment: its answer, proven nothing, or left it unknown. */
type Attempt = { answer: SettleResponse } | { notSettled: string } | { unknown: string };

/** Why a call brought no answer to believe. */
type NoAnswer = Extract<CallOutcome, { kind: 'failed' }> | { failure: 'bad_answer' | 'unexpected_error'; error: string };

export function remoteSettlement(deps: RemoteSettlementDeps): RemoteSettlement {
  const { config, log, metrics } = deps;
  const breakers = new CircuitBreakers({ ...config.breaker, ...(deps.now ? { now: deps.now } : {}) });
  // Bounded: a few connections per facilitator, and every call carries its own deadline.
  const dispatcher = new Agent({ connections: 64, connect: { timeout: config.connectTimeoutMs }, headersTimeout: config.timeoutMs, bodyTimeout: config.timeoutMs, keepAliveTimeout: 10_000 });
  const inFlight = new Map<string, Promise<SettleResponse>>();
  const admission = new RemoteAdmission(config.admission);
  const byName = new Map<string, FacilitatorEndpoint>();
  for (const list of config.networks.values()) for (const f of list) byName.set(f.name, f);
  metrics.watchFacilitators(
    [...config.networks].flatMap(([network, list]) => list.map((f) => ({ facilitator: f.name, network }))),
    (name) => breakers.state(byName.get(name)?.url ?? name),
  );

  /** The refusal of a payment the local checks refuse, or ok when it may go to a facilitator. */
  const refusedHere = async (request: VerifyRequest): Promise<Ok<undefined> | Err<PaymentRefusal>> => {
    const pre = await deps.precheck(request);
    if (!pre.ok) return pre;
    if (pre.value.signedByKey) return ok(undefined);
    const verdict = await deps.local.verify(request);
    if (verdict.isValid) return ok(undefined);
    const refusal: PaymentRefusal = {
      ...err((verdict.invalidReason ?? GatewayReason.unexpected) as InvalidReason, verdict.invalidMessage ?? '').error,
      ...(verdict.payer ? { payer: verdict.payer as Address } : {}),
    };
    return { ok: false, error: refusal };
  };

  const call = (f: FacilitatorEndpoint, route: 'settle' | 'verify', request: VerifyRequest) => callFacilitator(f, route, request, dispatcher, config.timeoutMs);

  /** A failed call: counted, logged, and held against the facilitator's breaker (once per payment) unless it refused with a 4xx (it is up). */
  const failed = (f: FacilitatorEndpoint, ticket: BreakerTicket, network: string, key: string, outcome: NoAnswer) => {
    if (outcome.failure === 'http_4xx') ticket.release();
    else ticket.failure(key);
    metrics.facilitatorError(f.name, network, outcome.failure);
    log.warn('a facilitator gave no usable answer', { facilitator: f.name, network, payment: key, kind: outcome.failure, error: outcome.error });
  };

  /** The chain's word on a payment whose outcome at a facilitator is unknown. */
  const fromChain = async (request: VerifyRequest, key: string): Promise<Attempt> => {
    let found: Consumption | undefined;
    try {
      found = await deps.consumption(request);
    } catch (err) {
      log.warn('could not read whether a payment of unknown outcome settled', { payment: key, error: err });
      return { unknown: 'the chain could not be read' };
    }
    const network = request.paymentRequirements.network;
    if (found === undefined) return { unknown: `${network} is not readable here` };
    if (!found.consumed) return { notSettled: 'its authorization is not consumed on chain' };
    const payer = payerOf(request);
    if (found.transaction !== undefined) return { answer: { success: true, transaction: found.transaction, network, payer } };
    return { answer: { success: false, errorReason: schemeOfPayload(request.paymentPayload.payload).reasons.nonceUsed, errorMessage: found.why, transaction: '', network, payer } };
  };

  /** One facilitator's attempt at `request`, its unknown outcome resolved as the module comment says. */
  const attempt = async (f: FacilitatorEndpoint, ticket: BreakerTicket, request: VerifyRequest, key: string): Promise<Attempt> => {
    const network = request.paymentRequirements.network;
    const first = await call(f, 'settle', request);
    const judged = settleAnswerOf(first, network);
    if (judged.ok) {
      ticket.success();
      return { answer: judged.value };
    }
    failed(f, ticket, network, key, judged.error.failure);
    if (!judged.error.sent) return { notSettled: judged.error.failure.error };
    const again = settleAnswerOf(await call(f, 'settle', request), network);
    if (again.ok) {
      log.info('a facilitator asked again answered a payment of unknown outcome', { facilitator: f.name, payment: key, success: again.value.success });
      return { answer: again.value };
    }
    return fromChain(request, key);
  };

  const settleRemotely = async (request: VerifyRequest, list: FacilitatorEndpoint[]): Promise<SettleResponse> => {
    const network = request.paymentRequirements.network;
    const key = nonceKeyOf(request);
    for (const [i, f] of list.entries()) {
      const isLast = i === list.length - 1;
      const ticket = breakers.admit(f.url);
      if (!ticket) {
        if (!isLast) metrics.facilitatorFailover(f.name, network);
        continue;
      }
      let result: Attempt;
      try {
        result = await attempt(f, ticket, request, key);
      } finally {
        ticket.release();
      }
      if ('answer' in result) return result.answer;
      if ('unknown' in result) {
        log.warn('a payment of unknown outcome is not passed to another facilitator', { facilitator: f.name, payment: key, why: result.unknown });
        return unknownOutcome(network, result.unknown);
      }
      if (!isLast) {
        metrics.facilitatorFailover(f.name, network);
        log.warn('failing over to the next facilitator', { from: f.name, to: list[i + 1]?.name, payment: key, why: result.notSettled });
      }
    }
    const retryAfterSeconds = Math.max(1, Math.min(...list.map((f) => breakers.retryAfterSeconds(f.url) || 1)));
    return {
      success: false,
      errorReason: GatewayReason.settlementUnavailable,
      errorMessage: 'no facilitator could take the payment, and none settled it',
      transaction: '',
      network,
      extra: { retryAfterSeconds },
    };
  };

  /** A payment on a network with facilitators: refused here, or settled by one of them (`list`). */
  const settleHere = async (request: VerifyRequest, list: FacilitatorEndpoint[]): Promise<SettleResponse> => {
    const refused = await refusedHere(request);
    if (!refused.ok) {
      // A payment that may have settled already (its window has passed since, or its nonce is used) is the chain's to
      // answer: a buyer asking again for a paid, pending or unserved request is served, not refused.
      if (mayHaveSettled(request, refused.error.code)) {
        const chain = await fromChain(request, nonceKeyOf(request));
        if ('answer' in chain) return chain.answer;
        if ('unknown' in chain) return unknownOutcome(request.paymentRequirements.network, chain.unknown);
      }
      const { code, message, payer } = refused.error;
      return { success: false, errorReason: code, errorMessage: message, transaction: '', network: request.paymentRequirements.network, ...(payer ? { payer } : {}) };
    }
    return settleRemotely(request, list);
  };

  /** The one running settlement of this very payment (same nonce, same terms), if any. */
  const idOf = (request: VerifyRequest) => `${nonceKeyOf(request)}|${fingerprintOf(request)}`;

  return {
    async settle(request, client) {
      const network = request.paymentRequirements.network;
      const list = config.networks.get(network);
      if (!list) return deps.local.settle(request, client);
      const id = idOf(request);
      // A payment already being settled is answered by its settlement, never turned away for the place it holds.
      const running = inFlight.get(id);
      if (running) return running;
      const place = admission.enter(network, client);
      if ('shed' in place) {
        metrics.paymentShed(network, place.shed.reason);
        return shedAnswer(network, place.shed);
      }
      const settled = settleHere(request, list).finally(() => {
        inFlight.delete(id);
        place.ticket.release();
      });
      inFlight.set(id, settled);
      return settled;
    },
    async shedding(request, client) {
      const network = request.paymentRequirements.network;
      if (!config.networks.has(network)) return deps.local.shedding(request, client);
      if (inFlight.has(idOf(request))) return undefined;
      return admission.shedding(network, client);
    },
    supported: () => deps.local.supported(),
    get inFlight() {
      return admission.inFlight;
    },
    async verify(request) {
      const list = config.networks.get(request.paymentRequirements.network);
      if (!list) return deps.local.verify(request);
      const refused = await refusedHere(request);
      if (!refused.ok) return { isValid: false, invalidReason: refused.error.code, invalidMessage: refused.error.message, ...(refused.error.payer ? { payer: refused.error.payer } : {}) };
      const network = request.paymentRequirements.network;
      const key = nonceKeyOf(request);
      for (const f of list) {
        const ticket = breakers.admit(f.url);
        if (!ticket) continue;
        try {
          const outcome = await call(f, 'verify', request);
          const answer = outcome.kind === 'answered' ? validateVerifyResponse(outcome.body) : undefined;
          if (answer?.ok) {
            ticket.success();
            return answer.value;
          }
          failed(f, ticket, network, key, outcome.kind === 'failed' ? outcome : { failure: 'bad_answer', error: 'not a verify answer' });
        } finally {
          ticket.release();
        }
      }
      const unavailable: VerifyResponse = { isValid: false, invalidReason: GatewayReason.settlementUnavailable, invalidMessage: 'no facilitator could check the payment' };
      return unavailable;
    },
    close: () => dispatcher.close(),
  };
}

/**
 * A settle call's answer, or why it is none and whether the request may have been acted on. A facilitator's
 * `unexpected_settle_error` ("ask again with the same payment") is no answer; `settlement_pending` with its
 * transaction is, and is marked pending.
 */
function settleAnswerOf(outcome: CallOutcome, network: string): Ok<SettleResponse> | Err<{ sent: boolean; failure: NoAnswer }> {
  const none = (sent: boolean, failure: NoAnswer): Err<{ sent: boolean; failure: NoAnswer }> => ({ ok: false, error: { sent, failure } });
  if (outcome.kind === 'failed') return none(outcome.sent, outcome);
  const decoded = validateSettleResponse(outcome.body);
  if (!decoded.ok) return none(true, { failure: 'bad_answer', error: `not a settle answer: ${decoded.error.message}` });
  const answer = decoded.value;
  if (answer.network !== network) return none(true, { failure: 'bad_answer', error: `an answer for ${answer.network}` });
  if (answer.success && !/^0x[0-9a-fA-F]{64}$/.test(answer.transaction)) return none(true, { failure: 'bad_answer', error: 'a settlement without its transaction' });
  if (!answer.success && answer.errorReason === GatewayReason.unexpectedSettle) return none(true, { failure: 'unexpected_error', error: answer.errorMessage ?? '' });
  if (!answer.success && answer.errorReason === 'settlement_pending' && answer.transaction !== '') return ok({ ...answer, status: 'pending' });
  return ok(answer);
}

/** The settle answer of a payment turned away for backpressure (503 with Retry-After, nothing charged). */
function shedAnswer(network: string, shed: Shed): SettleResponse {
  return {
    success: false,
    errorReason: SETTLEMENT_SHED,
    errorMessage: unchargedText(`remote settlement is behind right now (${shed.reason})`),
    transaction: '',
    network: network as SettleResponse['network'],
    extra: { reason: shed.reason, retryAfterSeconds: shed.retryAfterSeconds },
  };
}

/** The answer for a payment whose settlement could not be learned: 503, and the buyer asks again with it. */
function unknownOutcome(network: SettleResponse['network'], why: string): SettleResponse {
  return {
    success: false,
    errorReason: GatewayReason.settlementUnknown,
    errorMessage: `whether the payment settled could not be learned (${why}); send the same credential again: it is never charged twice`,
    transaction: '',
    network,
    extra: { retryAfterSeconds: 5 },
  };
}

/** Local refusals that a payment settled earlier also gets: its time window passed, or its nonce is used. */
const EXPIRED = new Set<string>([Eip3009Reason.validBefore, Permit2Reason.deadlineExpired]);
function mayHaveSettled(request: VerifyRequest, reason: string): boolean {
  return EXPIRED.has(reason) || reason === schemeOfPayload(request.paymentPayload.payload).reasons.nonceUsed;
}

function payerOf(request: VerifyRequest): string {
  const payload = request.paymentPayload.payload;
  return isPermit2Payload(payload) ? payload.permit2Authorization.from : payload.authorization.from;
}
