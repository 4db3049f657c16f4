/**
 * The steps of buying a paid request, in order (see `paid` in `paid-route.ts`): each answers the request (an `Err`
 * carrying the answer: the purchase ends there) or hands on what the next step needs. Up to `settled`, nothing is
 * charged and the credential stays good; from `claimed` on, the buyer has paid, and whatever goes wrong answers 502
 * with the settlement, the credential still redeemable.
 */
import type { PaidCredential, RouteTerms, Door } from '../../front-door/door.ts';
import type { PaymentRequired } from '../../front-door/payment-required.ts';
import { ipRateLimitKey } from '../../http/ip.ts';
import type { HttpRequest, HttpResponse } from '../../http/server.ts';
import { SETTLEMENT_SHED } from '../../ports/settlement.ts';
import { latencyOf, upstreamFailed, type UpstreamAnswer, type UpstreamCall, type UpstreamResult } from '../../ports/upstream.ts';
import { bodyDigest } from '../../protocol/mpp/binding.ts';
import { ok, uncharged, type Err, type Ok } from '../../protocol/result.ts';
import type { SettleResponse } from '../../protocol/x402/types.ts';
import type { BreakerTicket } from '../../resilience/circuit-breaker.ts';
import { SCHEMES } from '../../schemes/registry.ts';
import { GatewayReason } from '../../verify/reasons.ts';
import type { Merchant, MerchantRoute } from '../catalog/merchant.ts';
import { behind, paidUnserved, pending, settlementDown, shedOf, unchargedAnswer } from './answers.ts';
import type { PaidRequestRecord, PaywallDeps } from './deps.ts';
import { forwardToUpstream } from './forward.ts';
import { paidAnswerHeaders } from './paid-headers.ts';
import { guardRefused } from './guard-refusal.ts';
import { claimForServing, markServedPatiently, releaseServing, SERVING_SLACK_MS, servedState, type ServingClaim } from './served-claims.ts';
import { confinedUpstreamUrl } from './upstream-path.ts';

/** One purchase under way: the request, what it pays with, and the door and breaker admission it came through. */
export interface Purchase {
  readonly deps: PaywallDeps;
  readonly required: PaymentRequired;
  readonly req: HttpRequest;
  readonly merchant: Merchant;
  readonly route: MerchantRoute;
  readonly terms: RouteTerms;
  readonly door: Door;
  readonly credential: PaidCredential;
  /** The payment's nonce key: what it is served and counted under. */
  readonly key: string;
  /** Whose share of the settlement queue it draws on. */
  readonly client: string;
  readonly upstreamPath: string;
  /** Its breaker admission: the upstream call's outcome is reported through it (its holder releases it). */
  readonly ticket: BreakerTicket;
  /** The body's digest, once read (`bodyBound`): the 402s made from then on bind their fresh challenges to it. */
  digest?: string;
}

/** What a caller of `paid` may add: its signature already checked, and hooks on the payment's outcome. */
export interface PaidHooks {
  /** The credential's signature was checked before its body was read (the caller did it). */
  signatureChecked?: boolean;
  /** The payment settled (or was broadcast and is pending): it is charged. */
  onCharged?: () => void;
  /** The upstream's answer is ready and about to be sent, before the payment is marked served. */
  beforeServed?: (response: HttpResponse) => Promise<void>;
}

/** A step's outcome: what the next step needs, or the answer that ends the purchase. */
export type Step<T> = Ok<T> | Err<HttpResponse>;

/** A settled (or pending-and-charged, answered at once) payment, and the door's proof of it for the answer. */
export interface Settled {
  settlement: SettleResponse;
  receipt: Record<string, string>;
}

const stop = (answer: HttpResponse): Err<HttpResponse> => ({ ok: false, error: answer });
const go = ok(undefined);

const USED = 'this payment has already been used for a request';

/** Reasons of a credential whose signature is not the payer's: the checks run before a body is read. */
export const SIGNATURE_REASONS = new Set<string>(SCHEMES.map((s) => s.reasons.signature));

/** Reasons of a settlement that did not happen because the settlement service is down (503), not the payment refused. */
const SETTLEMENT_DOWN = new Set<string>([GatewayReason.settlementUnavailable, GatewayReason.settlementUnknown, GatewayReason.contractPayerWaits]);

/** Whose share of the settlement queue a request draws on: its address (IPv6: its /64), as the rate limits key it. */
export function clientOf(req: HttpRequest): string {
  return ipRateLimitKey(req.remoteIp);
}

/** True for a POST that carries a body: its MPP challenge is bound to the body's digest. */
export function sendsBody(req: HttpRequest): boolean {
  if (req.method !== 'POST') return false;
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}

/** The `digest` a challenge for this request carries (read from its body), or undefined. */
export async function postedDigest(req: HttpRequest): Promise<string | undefined> {
  return sendsBody(req) ? bodyDigest(await req.body()) : undefined;
}

/** The 402 refusing the purchase's credential (verification failed), with fresh challenges to pay again. */
export function refused(p: Purchase, detail: string, settlement?: SettleResponse): HttpResponse {
  const asked = { method: p.req.method === 'POST' ? ('POST' as const) : ('GET' as const), path: p.req.path, digest: p.digest };
  return p.required.refused(p.terms, asked, { problem: 'verification-failed', detail, ...(settlement && { settlement }) });
}

/** Served claim: a payment buys one upstream call; one served (or being served) buys nothing more. */
export async function unserved(p: Purchase): Promise<Step<void>> {
  const { served, live } = p.deps.stores;
  return (await servedState(await served.holder(p.key), live)) === 'free' ? go : stop(refused(p, USED));
}

/** Shed: settlement behind, turned away before anything is verified, read or charged; the credential stays good. */
export async function unshed(p: Purchase): Promise<Step<void>> {
  const shed = await p.deps.settlement.shedding(p.credential.request, p.client);
  if (shed === undefined) return go;
  p.deps.metrics.paymentShed(p.credential.request.paymentRequirements.network, shed.reason);
  return stop(behind(shed));
}

/** Signature pre-check: a body is read only for a credential whose signature checks, so a forged one reads none. */
export async function signedBeforeBody(p: Purchase): Promise<Step<void>> {
  if (!sendsBody(p.req)) return go;
  const verdict = await p.deps.settlement.verify(p.credential.request);
  return !verdict.isValid && SIGNATURE_REASONS.has(verdict.invalidReason ?? '') ? stop(refused(p, `payment refused: ${verdict.invalidReason}`)) : go;
}

/** Body binding: the body is read, and a credential made for another body (MPP's `digest`) is refused. */
export async function bodyBound(p: Purchase): Promise<Step<void>> {
  const digest = await postedDigest(p.req);
  if (digest !== undefined) p.digest = digest;
  const other = p.door.unbound?.(p.credential, digest);
  return other === undefined ? go : stop(refused(p, other));
}

/** Upstream preparation: the call is made ready first, so a request it can only refuse is refused uncharged. */
export async function preparedUpstream(p: Purchase): Promise<Step<UpstreamCall>> {
  const { req, merchant, upstreamPath: path } = p;
  const deps = p.deps.upstream;
  const upstream = merchant.upstream;
  if (upstream.kind === 'file') {
    return ok(async (): Promise<UpstreamResult> => {
      const started = performance.now();
      const body = await deps.readFile(upstream.sha256);
      if (!body) return upstreamFailed(`file ${upstream.sha256} is missing`, performance.now() - started);
      return ok({ status: 200, headers: { 'content-type': upstream.contentType }, body, latencyMs: performance.now() - started });
    });
  }
  let url: string | undefined;
  if (upstream.kind === 'url') {
    const confined = confinedUpstreamUrl(upstream.baseUrl, path, req.query);
    if (!confined.ok) return stop(unchargedAnswer(uncharged('upstream_refused', confined.error.message, 400).error));
    url = confined.value;
    // What the connector would refuse is refused here, before the settlement: nothing charged, nothing called.
    const refuses = deps.preflight?.refuses(url);
    if (refuses === true || (refuses instanceof Promise && (await refuses))) return stop(guardRefused(merchant.slug));
  }
  const body = req.method === 'POST' ? await req.body() : undefined;
  const request = { method: req.method === 'HEAD' ? 'GET' : req.method, path, query: req.query, headers: req.headers, ...(body ? { body } : {}) };
  if (upstream.kind === 'internal') {
    const prepared = deps.internal(upstream.name, request);
    return prepared.ok ? prepared : stop(unchargedAnswer(uncharged('upstream_refused', prepared.error.message, prepared.error.status).error));
  }
  const target = url as string;
  return ok(() => forwardToUpstream(target, upstream.secretHeaders, request, deps.dispatcher, { timeoutMs: deps.timeoutMs, maxBytes: deps.maxBytes }));
}

/** Settle: charged (or pending: charged, answered 202), or refused, shed or unreachable with nothing charged. */
export async function settled(p: Purchase, hooks: PaidHooks): Promise<Step<Settled>> {
  const settlement = await p.deps.settlement.settle(p.credential.request, p.client);
  // Turned away at the settlement queue's door (counted there): as the early 503, nothing was charged.
  if (!settlement.success && settlement.errorReason === SETTLEMENT_SHED) return stop(behind(shedOf(settlement)));
  if (settlement.success || settlement.status === 'pending') hooks.onCharged?.();
  const receipt = await p.door.receipt(settlement, p.credential);
  if (settlement.status === 'pending') return stop(pending(settlement, receipt));
  // Settled through remote facilitators, none of which could answer: our outage, not the buyer's payment.
  if (!settlement.success && SETTLEMENT_DOWN.has(settlement.errorReason ?? '')) return stop(settlementDown(settlement, settlement.errorReason === GatewayReason.settlementUnknown));
  if (!settlement.success) return stop(refused(p, `payment refused: ${settlement.errorReason ?? 'unknown'}`, settlement));
  return ok({ settlement, receipt });
}

/** Claim for serving, durably, before the upstream is called: a crash from here on leaves the credential redeemable. */
export async function claimed(p: Purchase, s: Settled): Promise<Step<ServingClaim>> {
  const { served, live } = p.deps.stores;
  try {
    const claim = await claimForServing(served, p.key, live, { boundMs: p.deps.upstream.timeoutMs + SERVING_SLACK_MS });
    return claim ? ok(claim) : stop(refused(p, USED));
  } catch (err) {
    // The store cannot write (a full disk): the payment settled, nothing was claimed, so the credential stays good.
    p.deps.log.error('could not claim a settled payment for service', { payment: p.key, error: err });
    return stop(paidUnserved('the gateway could not record your settled payment; nothing else was charged', s.settlement, s.receipt));
  }
}

/** Call upstream, record, mark served: the paid answer; or 502 with the settlement, the credential still good. */
export async function served(p: Purchase, s: Settled, claim: ServingClaim, call: UpstreamCall, hooks: PaidHooks): Promise<HttpResponse> {
  try {
    const result = await call();
    const answer = calledUpstream(p, result);
    const record = paidRequest(p, s, claim, result);
    if (answer === undefined) {
      recorded(p, record);
      return await failedAfterPayment(p, s, claim, !result.ok ? result.error.message : `status ${result.value.status}`);
    }
    const response: HttpResponse = { status: answer.status, headers: paidAnswerHeaders(answer.headers, s.receipt), body: answer.status === 204 ? new Uint8Array(0) : answer.body };
    await hooks.beforeServed?.(response);
    return await markedServed(p, claim, response, record);
  } catch (err) {
    return failedAfterPayment(p, s, claim, err instanceof Error ? err.message : String(err));
  }
}

/** The upstream's answer, counted and reported to the breaker: passed on, or undefined when the call failed. */
export function calledUpstream(p: Purchase, result: UpstreamResult): UpstreamAnswer | undefined {
  const answer = result.ok ? answerable(result.value) : undefined;
  p.deps.metrics.upstreamCall(p.merchant.slug, result.ok ? result.value.status : 'error', latencyOf(result) / 1000);
  const failed = answer === undefined || answer.status >= 500;
  if (failed) p.ticket.failure(p.key);
  else p.ticket.success();
  return failed ? undefined : answer;
}

/** The paid request's record, kept for reconciliation, and the key it is filed under. */
function paidRequest(p: Purchase, s: Settled, claim: ServingClaim, result: UpstreamResult): { key: string; record: PaidRequestRecord } {
  const record: PaidRequestRecord = {
    merchant: p.merchant.slug,
    route: p.route.route,
    protocol: p.credential.protocol,
    payer: s.settlement.payer ?? '',
    amount: p.credential.request.paymentRequirements.amount,
    network: s.settlement.network,
    transaction: s.settlement.transaction,
    upstreamStatus: result.ok ? result.value.status : 'failed',
    latencyMs: Math.round(latencyOf(result)),
    at: p.deps.now(),
  };
  return { key: `${String(record.at).padStart(15, '0')}-${claim.id}`, record };
}

/** Record a paid request whose upstream failed (not waited for: a failed write is logged). */
function recorded(p: Purchase, { key, record }: { key: string; record: PaidRequestRecord }): void {
  const { deps } = p;
  void deps.stores.records.put(key, record).catch((err: unknown) => deps.log.error('could not record a paid request', { payment: p.key, error: err }));
}

/**
 * Mark served: the payment is spent once the answer is ready, durably, before it goes out; counted once. The paid
 * request's record is written in the same commit as the served mark (one write, not two); a store that does not
 * answer is waited for, within the claim's bound (`markServedPatiently`).
 */
async function markedServed(p: Purchase, claim: ServingClaim, response: HttpResponse, paid: { key: string; record: PaidRequestRecord }): Promise<HttpResponse> {
  if (!(await markServedPatiently(p.deps.stores.served, claim, () => p.deps.stores.records.putWithin(paid.key, paid.record)))) return refused(p, USED);
  p.deps.metrics.revenue(p.merchant.slug, p.credential.protocol, Number(p.route.priceUsd));
  return response;
}

/** The upstream failed after the payment settled: the claim is given back, so the same credential is served later. */
async function failedAfterPayment(p: Purchase, s: Settled, claim: ServingClaim, error: string): Promise<HttpResponse> {
  const { deps } = p;
  deps.log.warn('upstream failed after payment', { payment: p.key, merchant: p.merchant.slug, route: p.route.route, transaction: s.settlement.transaction, error });
  await releaseServing(deps.stores.served, claim).catch((err: unknown) => deps.log.error('could not release a served claim', { payment: p.key, error: err }));
  return paidUnserved('the merchant upstream failed after your payment settled', s.settlement, s.receipt);
}

/**
 * An upstream answer that may be passed on: a final status other than a redirect (never followed, and its Location
 * would name the upstream) and not 304 (conditional requests are not forwarded). Anything else fails the call.
 */
function answerable(result: UpstreamAnswer): UpstreamAnswer | undefined {
  const s = result.status;
  if (!Number.isInteger(s) || s < 200 || s > 599 || (s >= 300 && s < 400)) return undefined;
  return result;
}
