import { randomUUID } from 'node:crypto';
import type { Dispatcher } from 'undici';
import type { Hex } from 'viem';
import type { NetworkRegistry } from '../../chain/networks.ts';
import { nonceKeyOf } from '../../engine/payment-record.ts';
import type { HttpHandler, HttpRequest, HttpResponse } from '../../http/server.ts';
import type { Logger } from '../../log/logger.ts';
import type { Metrics } from '../../metrics/metrics.ts';
import { createChallenge, formatWwwAuthenticate } from '../../protocol/mpp/challenge.ts';
import { PROBLEM_CONTENT_TYPE, problemJson } from '../../protocol/mpp/problems.ts';
import { encodeReceipt, signReceipt } from '../../protocol/mpp/receipt.ts';
import type { ProblemCode } from '../../protocol/mpp/types.ts';
import { encodePaymentRequiredHeader, encodePaymentResponseHeader } from '../../protocol/x402/headers.ts';
import type { PaymentRequired, SettleResponse, VerifyRequest } from '../../protocol/x402/types.ts';
import type { DurableCollection } from '../../store/durable-collection.ts';
import type { NonceClaims } from '../../store/nonce-claims.ts';
import { findRoute, type Merchant, type MerchantRoute } from '../catalog/merchant.ts';
import type { CircuitBreakers } from './circuit-breaker.ts';
import { readCredential, type Credential, type RouteTerms } from './credentials.ts';
import { forwardToUpstream, type InternalUpstream, type PreparedCall, type UpstreamResult } from './forward.ts';
import { mppNetworkFor, mppRequestFor, mppRequirements, offersFor } from './offers.ts';

/** One paid request, as recorded: enough to reconcile revenue, disputes and upstream health. */
export interface PaidRequestRecord {
  merchant: string;
  route: string;
  protocol: 'x402' | 'mpp';
  payer: string;
  amount: string;
  network: string;
  transaction: string;
  upstreamStatus: number | 'failed';
  latencyMs: number;
  at: number;
}

export interface PaywallDeps {
  networks: NetworkRegistry;
  settle(request: VerifyRequest): Promise<SettleResponse>;
  merchant(slug: string): Merchant | undefined;
  /** Which payments have been served upstream: a payment buys one upstream call. */
  served: NonceClaims;
  records: DurableCollection<PaidRequestRecord>;
  dispatcher: Dispatcher;
  breakers: CircuitBreakers;
  readFile(sha256: string): Promise<Uint8Array | undefined>;
  /** The upstreams served inside the gateway (built-in merchants only). */
  internalUpstream: InternalUpstream;
  mppKey: Uint8Array;
  realm: string;
  receiptKey: Hex;
  baseUrl: string;
  upstreamTimeoutMs: number;
  challengeTtlMs: number;
  log: Logger;
  metrics: PaywallMetrics;
  now(): number;
}

export type PaywallMetrics = Pick<Metrics, 'challengeIssued' | 'upstreamCall' | 'revenue'>;

const json = (status: number, value: unknown, headers: Record<string, string> = {}): HttpResponse => ({
  status,
  headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers },
  body: JSON.stringify(value),
});

/**
 * The unpaid 402 is the hot path, and everything in it is deterministic: a route's terms change only with the
 * merchant, PAYMENT-REQUIRED only with the path, and an MPP challenge id only with its `expires` second. So they
 * are memoized; the bytes sent are the same as computed afresh. Within one `expires` second a path's whole unpaid
 * 402 is one frozen response, which the server then encodes only once.
 */
class ChallengeMemo {
  readonly #terms = new Map<string, { terms: Omit<RouteTerms, 'nowMs'>; at: number }>();
  /** The `expires` second the two maps below are for: MPP challenges, and whole unpaid 402s. */
  #second = Number.NaN;
  readonly #mpp = new Map<string, string | undefined>();
  readonly #unpaid = new Map<string, HttpResponse>();
  readonly #max = 4096;

  terms(deps: PaywallDeps, merchant: Merchant, route: MerchantRoute): RouteTerms {
    const key = `${merchant.slug}|${route.route}`;
    const hit = this.#terms.get(key);
    if (hit && hit.at === merchant.updatedAt) return { ...hit.terms, nowMs: deps.now() };
    const fresh = routeTerms(deps, merchant, route);
    this.#bounded(this.#terms).set(key, { terms: fresh, at: merchant.updatedAt });
    return fresh;
  }

  /** An MPP challenge, packed as `id\nWWW-Authenticate` (`undefined` when it cannot be made). */
  mpp(second: number, key: string, make: () => string | undefined): string | undefined {
    this.#at(second);
    if (this.#mpp.has(key)) return this.#mpp.get(key);
    const made = make();
    this.#bounded(this.#mpp).set(key, made);
    return made;
  }

  /** This second's unpaid 402 for `key`, when it has been made. */
  unpaid(second: number, key: string): HttpResponse | undefined {
    this.#at(second);
    return this.#unpaid.get(key);
  }

  /** Keeps `made` as this second's unpaid 402 for `key`; returns it frozen, as it is kept. */
  keepUnpaid(key: string, made: HttpResponse): HttpResponse {
    const frozen = Object.freeze({ ...made, ...(made.headers ? { headers: Object.freeze({ ...made.headers }) } : {}) });
    this.#bounded(this.#unpaid).set(key, frozen);
    return frozen;
  }

  #at(second: number): void {
    if (second === this.#second) return;
    this.#second = second;
    this.#mpp.clear();
    this.#unpaid.clear();
  }

  #bounded<K, V>(map: Map<K, V>): Map<K, V> {
    if (map.size >= this.#max) map.clear();
    return map;
  }
}

/** `/m/{slug}/{route}[/appended/segments]`: 402 until paid, then the upstream's answer, verbatim. */
export function paidRouteHandler(deps: PaywallDeps): HttpHandler {
  const memo = new ChallengeMemo();
  // Not `async`: the unpaid 402 is answered synchronously, before the server's route callback returns.
  return (req) => {
    const slug = req.params['slug'] ?? '';
    const merchant = deps.merchant(slug);
    if (!merchant) return json(404, { error: `no merchant '${slug}'` });
    const rest = req.params['*'] ?? '';
    const cut = rest.indexOf('/');
    const routeName = cut < 0 ? rest : rest.slice(0, cut);
    const route = findRoute(merchant, decodeURIComponent(routeName));
    if (!route) return json(404, { error: `merchant '${slug}' has no route '${routeName}'` });
    if (!route.methods.includes(req.method === 'HEAD' ? 'GET' : (req.method as 'GET' | 'POST'))) {
      return json(405, { error: `${req.method} is not allowed here` }, { allow: route.methods.join(', ') });
    }
    // An upstream known to be failing is refused before anyone pays for it.
    if (!deps.breakers.admit(slug)) {
      return json(503, { error: `merchant '${slug}' is unavailable right now; nothing was charged` }, { 'retry-after': String(deps.breakers.retryAfterSeconds(slug)) });
    }
    const terms = memo.terms(deps, merchant, route);
    const credential = readCredential(req.headers, terms);
    if (credential.kind === 'none') {
      deps.breakers.release(slug);
      const key = `${merchant.slug}|${merchant.updatedAt}|${route.route}|${req.path}`;
      const kept = memo.unpaid(expiresSecond(deps, terms.nowMs), key);
      if (kept === undefined) return memo.keepUnpaid(key, challenge(deps, req, merchant, route, terms, credential, terms.nowMs, {}, memo));
      // Counted as challenge() counts the 402s it makes.
      deps.metrics.challengeIssued('x402');
      if (kept.headers?.['WWW-Authenticate'] !== undefined) deps.metrics.challengeIssued('mpp');
      return kept;
    }
    if (credential.kind === 'invalid') {
      deps.breakers.release(slug);
      return challenge(deps, req, merchant, route, terms, credential, terms.nowMs, {}, memo);
    }
    // However it ends (body too large, client gone, a throw), a half-open trial this request held is given back.
    return paid(deps, req, merchant, route, terms, credential, rest).finally(() => deps.breakers.release(slug));
  };
}

function routeTerms(deps: PaywallDeps, merchant: Merchant, route: MerchantRoute): RouteTerms {
  const offers = offersFor(merchant, route, deps.networks);
  const n = mppNetworkFor(merchant, deps.networks);
  const mpp = n ? { network: n, request: mppRequestFor(merchant, route, n) } : undefined;
  return {
    offers,
    ...(mpp ? { mpp: { ...mpp, requirements: mppRequirements(mpp.request, mpp.network) } } : {}),
    mppKey: deps.mppKey,
    nowMs: deps.now(),
  };
}

/** `expires` of an MPP challenge made at `nowMs`, in whole seconds. */
function expiresSecond(deps: PaywallDeps, nowMs: number): number {
  return Math.floor((nowMs + deps.challengeTtlMs) / 1000);
}

/** The 402: x402 offers in PAYMENT-REQUIRED, a fresh MPP challenge in WWW-Authenticate, problem+json in the body. */
function challenge(
  deps: PaywallDeps,
  req: HttpRequest,
  merchant: Merchant,
  route: MerchantRoute,
  terms: RouteTerms,
  credential: Credential,
  nowMs: number,
  extra: { settle?: SettleResponse; problem?: ProblemCode; detail?: string } = {},
  memo?: ChallengeMemo,
): HttpResponse {
  const invalid = credential.kind === 'invalid' ? credential : undefined;
  const error = invalid || extra.detail ? extra.detail ?? invalid?.detail : undefined;
  const headers: Record<string, string> = {
    'content-type': PROBLEM_CONTENT_TYPE,
    'cache-control': 'no-store',
    'PAYMENT-REQUIRED': encodePaymentRequiredHeader({
      x402Version: 2,
      ...(error !== undefined ? { error } : {}),
      resource: { url: `${deps.baseUrl}${req.path}`, description: route.summary, mimeType: 'application/json' },
      accepts: terms.offers,
    } satisfies PaymentRequired),
  };
  deps.metrics.challengeIssued('x402');
  let challengeId: string | undefined;
  if (terms.mpp) {
    // `expires` carries whole seconds: within one second the same route gets the same challenge, id included.
    const second = expiresSecond(deps, nowMs);
    const mppTerms = terms.mpp;
    const makeMpp = () => {
      const made = createChallenge(deps.mppKey, { realm: deps.realm, request: mppTerms.request, expires: new Date(second * 1000), description: `${merchant.name}: ${route.summary}` });
      return made.ok ? `${made.value.id}\n${formatWwwAuthenticate(made.value)}` : undefined;
    };
    const packed = memo ? memo.mpp(second, `${merchant.slug}|${merchant.updatedAt}|${route.route}`, makeMpp) : makeMpp();
    if (packed !== undefined) {
      const cut = packed.indexOf('\n');
      challengeId = packed.slice(0, cut);
      headers['WWW-Authenticate'] = packed.slice(cut + 1);
      deps.metrics.challengeIssued('mpp');
    }
  }
  if (extra.settle) headers['PAYMENT-RESPONSE'] = encodePaymentResponseHeader(extra.settle);
  const code: ProblemCode = extra.problem ?? invalid?.problem ?? 'payment-required';
  const status = invalid?.status ?? (code === 'method-unsupported' ? 400 : 402);
  const detail = extra.detail ?? invalid?.detail ?? `${route.summary}: ${route.priceUsd} USD. Pay with x402 (PAYMENT-SIGNATURE) or MPP (Authorization: Payment).`;
  return { status, headers, body: JSON.stringify(problemJson(code, detail, challengeId)) };
}

async function paid(
  deps: PaywallDeps,
  req: HttpRequest,
  merchant: Merchant,
  route: MerchantRoute,
  terms: RouteTerms,
  credential: Extract<Credential, { kind: 'x402' | 'mpp' }>,
  upstreamPath: string,
): Promise<HttpResponse> {
  const slug = merchant.slug;
  const key = nonceKeyOf(credential.request);
  const used = (detail: string) => {
    deps.breakers.release(slug);
    return challenge(deps, req, merchant, route, terms, credential, deps.now(), { problem: 'verification-failed', detail });
  };
  if (deps.served.holder(key) !== undefined) return used('this payment has already been used for a request');
  // The upstream call is made ready first: a request it can only refuse is refused before anything is charged.
  const upstream = await prepareUpstream(deps, merchant, req, upstreamPath);
  if (!upstream.ok) {
    deps.breakers.release(slug);
    return json(upstream.status, { error: `${upstream.error}; nothing was charged` });
  }

  const settlement = await deps.settle(credential.request);
  const paymentHeaders = await paymentHeadersFor(deps, credential, settlement);
  if (settlement.status === 'pending') {
    deps.breakers.release(slug);
    return json(
      202,
      {
        status: 'pending',
        transaction: settlement.transaction,
        network: settlement.network,
        detail: 'the payment is broadcast but not yet confirmed; send the same request with the same credential to receive the resource once it confirms, without paying again',
      },
      paymentHeaders,
    );
  }
  if (!settlement.success) {
    deps.breakers.release(slug);
    return challenge(deps, req, merchant, route, terms, credential, deps.now(), { settle: settlement, problem: 'verification-failed', detail: `payment refused: ${settlement.errorReason ?? 'unknown'}` });
  }
  const servedBy = randomUUID();
  const claim = await deps.served.claim(key, servedBy);
  if (!claim.claimed) return used('this payment has already been used for a request');

  const result = await upstream.call();
  deps.metrics.upstreamCall(slug, result.ok ? result.status : 'error', result.latencyMs / 1000);
  const upstreamFailed = !result.ok || result.status >= 500;
  if (upstreamFailed) deps.breakers.failure(slug, key);
  else deps.breakers.success(slug);
  const record: PaidRequestRecord = {
    merchant: slug,
    route: route.route,
    protocol: credential.kind,
    payer: settlement.payer ?? '',
    amount: credential.request.paymentRequirements.amount,
    network: settlement.network,
    transaction: settlement.transaction,
    upstreamStatus: result.ok ? result.status : 'failed',
    latencyMs: Math.round(result.latencyMs),
    at: deps.now(),
  };
  void deps.records.put(`${String(record.at).padStart(15, '0')}-${servedBy}`, record).catch((err: unknown) => deps.log.error('could not record a paid request', { payment: key, error: err }));
  if (upstreamFailed) {
    deps.log.warn('upstream failed after payment', { payment: key, merchant: slug, route: route.route, transaction: settlement.transaction, error: result.ok ? `status ${result.status}` : result.error });
    // The buyer keeps the right to the resource: the same credential may be sent again, and is not charged again.
    await deps.served.release(key, servedBy);
    return json(
      502,
      { error: 'the merchant upstream failed after your payment settled', transaction: settlement.transaction, network: settlement.network, retry: 'send the same request with the same credential; it will not be charged again' },
      paymentHeaders,
    );
  }
  // Counted once per payment: a served payment's claim is kept, so the credential buys nothing more.
  deps.metrics.revenue(slug, credential.kind, Number(route.priceUsd));
  return { status: (result as Extract<UpstreamResult, { ok: true }>).status, headers: { ...(result as Extract<UpstreamResult, { ok: true }>).headers, ...paymentHeaders }, body: (result as Extract<UpstreamResult, { ok: true }>).body };
}

/** The upstream call of a paid request, ready to make once the payment settles; or its refusal before that. */
async function prepareUpstream(deps: PaywallDeps, merchant: Merchant, req: HttpRequest, path: string): Promise<PreparedCall> {
  const upstream = merchant.upstream;
  if (upstream.kind === 'file') {
    return {
      ok: true,
      async call(): Promise<UpstreamResult> {
        const started = performance.now();
        const body = await deps.readFile(upstream.sha256);
        if (!body) return { ok: false, error: `file ${upstream.sha256} is missing`, latencyMs: performance.now() - started };
        return { ok: true, status: 200, headers: { 'content-type': upstream.contentType, 'x-content-type-options': 'nosniff' }, body, latencyMs: performance.now() - started };
      },
    };
  }
  const body = req.method === 'POST' ? await req.body() : undefined;
  const request = { method: req.method === 'HEAD' ? 'GET' : req.method, path, query: req.query, headers: req.headers, ...(body ? { body } : {}) };
  if (upstream.kind === 'internal') return deps.internalUpstream(upstream.name, request);
  return { ok: true, call: () => forwardToUpstream(upstream, request, deps.dispatcher, deps.upstreamTimeoutMs) };
}

/** x402 answers with PAYMENT-RESPONSE; MPP with a signed Payment-Receipt once settled. */
async function paymentHeadersFor(deps: PaywallDeps, credential: Extract<Credential, { kind: 'x402' | 'mpp' }>, settlement: SettleResponse): Promise<Record<string, string>> {
  if (credential.kind === 'x402') return { 'PAYMENT-RESPONSE': encodePaymentResponseHeader(settlement) };
  if (!settlement.success) return {};
  const signed = await signReceipt(
    { status: 'success', method: 'evm', reference: settlement.transaction as Hex, timestamp: new Date(deps.now()).toISOString(), challengeId: credential.challenge.id, chainId: credential.chainId },
    deps.receiptKey,
  );
  if (!signed.ok) return {};
  const encoded = encodeReceipt(signed.value);
  return encoded.ok ? { 'Payment-Receipt': encoded.value } : {};
}
