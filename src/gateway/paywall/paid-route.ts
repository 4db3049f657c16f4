import type { Dispatcher } from 'undici';
import type { Hex } from 'viem';
import type { NetworkRegistry } from '../../chain/networks.ts';
import { fingerprintOf, nonceKeyOf } from '../../schemes/payment-identity.ts';
import { fillHeader, headerTemplate, type FilledHeader, type HeaderTemplate } from '../../http/header-template.ts';
import type { HttpHandler, HttpRequest, HttpResponse } from '../../http/server.ts';
import type { Logger } from '../../log/logger.ts';
import type { Metrics } from '../../metrics/metrics.ts';
import { bodyDigest, bodyMismatch, boundMethod, routeTag, saltSource } from '../../protocol/mpp/binding.ts';
import { challengeTemplate, issueFromTemplate, saltedHeaderParts, templateMac, type ChallengeTemplate } from '../../protocol/mpp/challenge-template.ts';
import { PROBLEM_CONTENT_TYPE, problemJson } from '../../protocol/mpp/problems.ts';
import { encodeReceipt, signReceipt } from '../../protocol/mpp/receipt.ts';
import type { ProblemCode } from '../../protocol/mpp/types.ts';
import type { SettleResponse, VerifyRequest, VerifyResponse } from '../../protocol/x402/types.ts';
import { SETTLEMENT_SHED, type Shed } from '../../ports/settlement.ts';
import { ipRateLimitKey } from '../../http/ip.ts';
import type { DurableCollection } from '../../store/durable-collection.ts';
import type { NonceClaims } from '../../store/nonce-claims.ts';
import { paymentIdentifierOf } from '../../protocol/x402/extensions/payment-identifier.ts';
import { SCHEMES, schemeOfPayload } from '../../schemes/registry.ts';
import { GatewayReason } from '../../verify/reasons.ts';
import { findRoute, type Merchant, type MerchantRoute } from '../catalog/merchant.ts';
import type { CircuitBreakers } from '../../resilience/circuit-breaker.ts';
import { readCredential, type Credential, type RouteTerms } from '../../front-door/credential.ts';
import { paymentRequired, paymentRequiredHeader, paymentResponseHeader } from '../../front-door/x402-answer.ts';
import type { PreparedCall, UpstreamResult } from '../../ports/upstream.ts';
import { ok, refusal } from '../../protocol/result.ts';
import { declaredExtensions } from '../../protocol/x402/extensions/index.ts';
import { paidResourceDescription } from '../discovery/paid-resource.ts';
import { forwardToUpstream, type InternalUpstream } from './forward.ts';
import { mppNetworkFor, mppRequestFor, mppRequirements, offersFor } from './offers.ts';
import { paidAnswerHeaders } from './paid-headers.ts';
import { encodeAnswer, paymentIdFingerprint, paymentIdKey, type PaymentIds, type RecordedAnswer } from './payment-ids.ts';
import { claimForServing, markServed, releaseServing, servedState, type BootLiveness } from './served-claims.ts';
import { checkQuery, confinedUpstreamUrl, confinePath, upstreamRelativePath } from './upstream-path.ts';

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
  /**
   * Settles a payment; `client` is the request's address (`clientOf`), whose share of the settlement queue is bounded.
   * An answer with `errorReason` `SETTLEMENT_SHED` turned it away for backpressure (503, nothing charged).
   */
  settle(request: VerifyRequest, client?: string): Promise<SettleResponse>;
  /**
   * Whether a new payment must be turned away now because settlement is behind (see `settlement-admission.ts`), or
   * because `client` holds its share of the queue: asked before its credential is verified or settled, so the 503 it
   * gets charged nothing.
   */
  shedding?(request: VerifyRequest, client?: string): Promise<Shed | undefined>;
  /**
   * Verification short of settling, run on a credential before its request's body is read: a credential whose
   * signature is not the payer's is refused without reading (or buffering) the body.
   */
  verify?(request: VerifyRequest): Promise<VerifyResponse>;
  /** Synchronously when the merchant is at hand (cached): an unpaid request's 402 is answered without waiting. */
  merchant(slug: string): Merchant | undefined | Promise<Merchant | undefined>;
  /** Which payments have been served upstream: a payment buys one upstream call. */
  served: NonceClaims;
  /** x402 payment identifiers (idempotency keys): what each is bound to, and its recorded answer. */
  paymentIds: PaymentIds;
  /** Whose `serving` claims still stand (default: this process's only; in a cluster, every live node's). */
  live?: BootLiveness;
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
  /** The largest upstream response body a paid request takes; a larger one fails the call (502, not charged again). */
  upstreamMaxBytes: number;
  challengeTtlMs: number;
  log: Logger;
  metrics: PaywallMetrics;
  now(): number;
}

export type PaywallMetrics = Pick<Metrics, 'challengeIssued' | 'upstreamCall' | 'revenue' | 'paymentShed'>;

const json = (status: number, value: unknown, headers: Record<string, string> = {}): HttpResponse => ({
  status,
  headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers },
  body: JSON.stringify(value),
});

/** How the MPP challenges of one route and method are made within one `expires` second (see `binding.ts`). */
interface MppIssuer {
  template: ChallengeTemplate;
  /** The route tag `opaque` starts with. */
  tag: string;
  /** The HMAC of this second's challenges without a body digest, made on first use. */
  mac?: string;
  /** Their `WWW-Authenticate` value around the id and `opaque`, checked once, on first use. */
  header?: HeaderTemplate;
}

/**
 * An unpaid 402 kept for one path within one `expires` second: the whole frozen response when the route takes no MPP
 * payment; otherwise all of it but the MPP challenge, which is made per 402: frozen headers and the body up to the id.
 */
type UnpaidTemplate = { response: HttpResponse; mpp?: undefined } | { mpp: { issuer: MppIssuer; headers: Readonly<Record<string, string>>; bodyHead: string } };

/** Randomness for every challenge's `opaque`: two 402s never share a challenge id, nor two payments an EIP-3009 nonce. */
const nextSalt = saltSource();

/**
 * A fresh MPP challenge: the same template, with this request's body digest and a new salt (in `opaque` and the id).
 * Without a digest (every unpaid GET) the header is filled into a template the server checked once.
 */
function issueMpp(deps: PaywallDeps, issuer: MppIssuer, digest: string | undefined): { id: string; header: string | FilledHeader } {
  const salt = nextSalt();
  if (digest !== undefined) return issueFromTemplate(issuer.template, templateMac(deps.mppKey, issuer.template, digest, issuer.tag), { digest, opaqueHead: issuer.tag, salt });
  issuer.mac ??= templateMac(deps.mppKey, issuer.template, undefined, issuer.tag);
  const id = `${issuer.mac}${salt}`;
  issuer.header ??= headerTemplate(saltedHeaderParts(issuer.template));
  return { id, header: fillHeader(issuer.header, [id, `${issuer.tag}${salt}`]) };
}

/**
 * The unpaid 402 is the hot path, and nearly everything in it is deterministic: a route's terms change only with the
 * merchant, PAYMENT-REQUIRED only with the path, and an MPP challenge's fields (but its `digest` and `opaque`, hence
 * its id) only with its `expires` second. So those are memoized, and within one `expires` second a path's unpaid 402
 * is a frozen set of headers and a body prefix, to which each 402 adds its own challenge: one HMAC and a few
 * concatenations.
 */
class ChallengeMemo {
  readonly #terms = new Map<string, { terms: Omit<RouteTerms, 'nowMs'>; at: number }>();
  readonly #extensions = new Map<string, { extensions: Record<string, unknown>; at: number }>();
  /** The `expires` second the two maps below are for: MPP challenge templates, and unpaid 402 templates. */
  #second = Number.NaN;
  readonly #mpp = new Map<string, MppIssuer | undefined>();
  readonly #unpaid = new Map<string, UnpaidTemplate>();
  readonly #max = 4096;

  terms(deps: PaywallDeps, merchant: Merchant, route: MerchantRoute): RouteTerms {
    const key = `${merchant.slug}|${route.route}`;
    const hit = this.#terms.get(key);
    if (hit && hit.at === merchant.updatedAt) return { ...hit.terms, nowMs: deps.now() };
    const fresh = routeTerms(deps, merchant, route);
    this.#bounded(this.#terms).set(key, { terms: fresh, at: merchant.updatedAt });
    return fresh;
  }

  /** The x402 extensions a 402 of this route and method declares; they change only with the merchant. */
  extensions(merchant: Merchant, route: MerchantRoute, method: 'GET' | 'POST'): Record<string, unknown> {
    const key = `${merchant.slug}|${route.route}|${method}`;
    const hit = this.#extensions.get(key);
    if (hit && hit.at === merchant.updatedAt) return hit.extensions;
    const extensions = declaredExtensions(paidResourceDescription(merchant, route, method));
    this.#bounded(this.#extensions).set(key, { extensions, at: merchant.updatedAt });
    return extensions;
  }

  /** How this second's MPP challenges for `key` are made (`undefined` when they cannot be). */
  mpp(second: number, key: string, make: () => MppIssuer | undefined): MppIssuer | undefined {
    this.#at(second);
    if (this.#mpp.has(key)) return this.#mpp.get(key);
    const made = make();
    this.#bounded(this.#mpp).set(key, made);
    return made;
  }

  /** This second's unpaid 402 template for `key`, made once. */
  unpaid(second: number, key: string, make: () => UnpaidTemplate): UnpaidTemplate {
    this.#at(second);
    const hit = this.#unpaid.get(key);
    if (hit !== undefined) return hit;
    const made = make();
    this.#bounded(this.#unpaid).set(key, made);
    return made;
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

const freeze = (r: HttpResponse): HttpResponse => Object.freeze({ ...r, ...(r.headers ? { headers: Object.freeze({ ...r.headers }) } : {}) });

/** True for a POST that carries a body: its MPP challenge is bound to the body's digest. */
function sendsBody(req: HttpRequest): boolean {
  if (req.method !== 'POST') return false;
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}

/** The `digest` an MPP challenge for this request carries (read from its body), or undefined. */
async function postedDigest(req: HttpRequest): Promise<string | undefined> {
  return sendsBody(req) ? bodyDigest(await req.body()) : undefined;
}

/** `/m/{slug}/{route}[/appended/segments]`: 402 until paid, then the upstream's answer, verbatim. */
export function paidRouteHandler(deps: PaywallDeps): HttpHandler {
  const memo = new ChallengeMemo();
  // Not `async`: the unpaid 402 is answered synchronously, before the server's route callback returns.
  const handle = (req: HttpRequest, slug: string, merchant: Merchant | undefined): Promise<HttpResponse> | HttpResponse => {
    if (!merchant) return json(404, { error: `no merchant '${slug}'` });
    // The path is checked before anything else: a path that could leave the route is refused, whatever is paid.
    const confined = confinePath(req.params['*'] ?? '');
    if (!confined.ok) return json(400, { error: `${confined.error.message}; nothing was charged` });
    const badQuery = checkQuery(req.query);
    if (badQuery) return json(400, { error: `${badQuery.error.message}; nothing was charged` });
    const { route: routeName, segments } = confined.value;
    const route = findRoute(merchant, routeName);
    if (!route) return json(404, { error: `merchant '${slug}' has no route '${routeName.slice(0, 64)}'` });
    if (!route.methods.includes(req.method === 'HEAD' ? 'GET' : (req.method as 'GET' | 'POST'))) {
      return json(405, { error: `${req.method} is not allowed here` }, { allow: route.methods.join(', ') });
    }
    // An upstream known to be failing is refused before anyone pays for it.
    if (!deps.breakers.admit(slug)) {
      return json(503, { error: `merchant '${slug}' is unavailable right now; nothing was charged` }, { 'retry-after': String(deps.breakers.retryAfterSeconds(slug)) });
    }
    const terms = memo.terms(deps, merchant, route);
    // HEAD never spends a credential: it answers what an unpaid GET would, whatever payment headers it carries.
    const credential: Credential = req.method === 'HEAD' ? { kind: 'none' } : readCredential(req.headers, terms, req.method);
    if (credential.kind === 'none') {
      deps.breakers.release(slug);
      // A POST's challenge is bound to its body, so that body is read first; other 402s answer at once.
      if (sendsBody(req)) return postedDigest(req).then((digest) => unpaid(deps, req, merchant, route, terms, memo, digest));
      return unpaid(deps, req, merchant, route, terms, memo, undefined);
    }
    if (credential.kind === 'invalid') {
      deps.breakers.release(slug);
      if (sendsBody(req)) return postedDigest(req).then((digest) => challenge(deps, req, merchant, route, terms, credential, terms.nowMs, { ...(digest !== undefined && { digest }) }, memo));
      return challenge(deps, req, merchant, route, terms, credential, terms.nowMs, {}, memo);
    }
    // However it ends (body too large, client gone, a throw), a half-open trial this request held is given back.
    const path = upstreamRelativePath(route.route, segments);
    const buying = credential.kind === 'x402' ? paidWithId(deps, req, merchant, route, terms, credential, path) : paid(deps, req, merchant, route, terms, credential, path);
    return buying.finally(() => deps.breakers.release(slug));
  };
  return (req) => {
    const slug = req.params.slug ?? '';
    const merchant = deps.merchant(slug);
    return merchant instanceof Promise ? merchant.then((m) => handle(req, slug, m)) : handle(req, slug, merchant);
  };
}

function routeTerms(deps: PaywallDeps, merchant: Merchant, route: MerchantRoute): RouteTerms {
  const offers = offersFor(merchant, route, deps.networks);
  const n = mppNetworkFor(merchant, deps.networks);
  const mpp = n ? { network: n, request: mppRequestFor(merchant, route, n) } : undefined;
  const routeTags = Object.fromEntries(route.methods.map((m) => [m, routeTag(merchant.slug, route.route, m)]));
  return {
    offers,
    ...(mpp ? { mpp: { ...mpp, requirements: mppRequirements(mpp.request, mpp.network), routeTags } } : {}),
    mppKey: deps.mppKey,
    nowMs: deps.now(),
  };
}

/** `expires` of an MPP challenge made at `nowMs`, in whole seconds. */
function expiresSecond(deps: PaywallDeps, nowMs: number): number {
  return Math.floor((nowMs + deps.challengeTtlMs) / 1000);
}

/** How this route's MPP challenges for `method` are made this `expires` second; undefined when it takes no MPP. */
function mppIssuer(deps: PaywallDeps, merchant: Merchant, route: MerchantRoute, terms: RouteTerms, method: string, nowMs: number, memo?: ChallengeMemo): MppIssuer | undefined {
  const mppTerms = terms.mpp;
  if (!mppTerms) return undefined;
  const second = expiresSecond(deps, nowMs);
  const make = (): MppIssuer | undefined => {
    const tag = mppTerms.routeTags[boundMethod(method)];
    const template = challengeTemplate({ realm: deps.realm, request: mppTerms.request, expires: new Date(second * 1000), description: `${merchant.name}: ${route.summary}` });
    return tag !== undefined && template.ok ? { template: template.value, tag } : undefined;
  };
  return memo ? memo.mpp(second, `${merchant.slug}|${merchant.updatedAt}|${route.route}|${boundMethod(method)}`, make) : make();
}

function paymentRequiredHeaders(
  deps: PaywallDeps,
  req: HttpRequest,
  merchant: Merchant,
  route: MerchantRoute,
  terms: RouteTerms,
  error: string | undefined,
  memo?: ChallengeMemo,
): Record<string, string> {
  const method = req.method === 'POST' ? 'POST' : 'GET';
  const extensions = memo ? memo.extensions(merchant, route, method) : declaredExtensions(paidResourceDescription(merchant, route, method));
  return {
    'content-type': PROBLEM_CONTENT_TYPE,
    'cache-control': 'no-store',
    ...paymentRequiredHeader(paymentRequired({ url: `${deps.baseUrl}${req.path}`, description: route.summary, mimeType: 'application/json' }, terms.offers, error, extensions)),
  };
}

const unpaidDetail = (route: MerchantRoute) => `${route.summary}: ${route.priceUsd} USD. Pay with x402 (PAYMENT-SIGNATURE) or MPP (Authorization: Payment).`;

/** The 402 for a request without a payment: this second's template for its path, plus a fresh MPP challenge. */
function unpaid(deps: PaywallDeps, req: HttpRequest, merchant: Merchant, route: MerchantRoute, terms: RouteTerms, memo: ChallengeMemo, digest: string | undefined): HttpResponse {
  const second = expiresSecond(deps, terms.nowMs);
  const key = `${merchant.slug}|${merchant.updatedAt}|${route.route}|${boundMethod(req.method)}|${req.path}`;
  const kept = memo.unpaid(second, key, () => {
    const headers = paymentRequiredHeaders(deps, req, merchant, route, terms, undefined, memo);
    const body = JSON.stringify(problemJson('payment-required', unpaidDetail(route)));
    const issuer = mppIssuer(deps, merchant, route, terms, req.method, terms.nowMs, memo);
    // problemJson puts challengeId last: the body is this head, the id, and `"}`.
    return issuer ? { mpp: { issuer, headers: Object.freeze(headers), bodyHead: `${body.slice(0, -1)},"challengeId":"` } } : { response: freeze({ status: 402, headers, body }) };
  });
  // Counted as challenge() counts the 402s it makes.
  deps.metrics.challengeIssued('x402');
  if (kept.mpp === undefined) return kept.response;
  const issued = issueMpp(deps, kept.mpp.issuer, digest);
  deps.metrics.challengeIssued('mpp');
  // The shared frozen headers are encoded once by the server; only this challenge's header and body are new.
  return { status: 402, headers: kept.mpp.headers, moreHeaders: { 'WWW-Authenticate': issued.header }, body: `${kept.mpp.bodyHead}${issued.id}"}` };
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
  extra: { settle?: SettleResponse; problem?: ProblemCode; detail?: string; digest?: string } = {},
  memo?: ChallengeMemo,
): HttpResponse {
  const invalid = credential.kind === 'invalid' ? credential : undefined;
  const error = invalid || extra.detail ? (extra.detail ?? invalid?.detail) : undefined;
  const headers = paymentRequiredHeaders(deps, req, merchant, route, terms, error, memo);
  deps.metrics.challengeIssued('x402');
  let challengeId: string | undefined;
  const issuer = mppIssuer(deps, merchant, route, terms, req.method, nowMs, memo);
  if (issuer) {
    const issued = issueMpp(deps, issuer, extra.digest);
    challengeId = issued.id;
    headers['WWW-Authenticate'] = typeof issued.header === 'string' ? issued.header : issued.header.value;
    deps.metrics.challengeIssued('mpp');
  }
  if (extra.settle) Object.assign(headers, paymentResponseHeader(extra.settle));
  const code: ProblemCode = extra.problem ?? invalid?.problem ?? 'payment-required';
  const status = invalid?.status ?? (code === 'method-unsupported' ? 400 : 402);
  const detail = extra.detail ?? invalid?.detail ?? unpaidDetail(route);
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
  hooks: PaidHooks = {},
): Promise<HttpResponse> {
  const slug = merchant.slug;
  const key = nonceKeyOf(credential.request);
  // Fresh MPP challenges of a POST are bound to its body, once it has been read.
  let bound: { digest?: string } = {};
  const used = (detail: string) => {
    deps.breakers.release(slug);
    return challenge(deps, req, merchant, route, terms, credential, deps.now(), { problem: 'verification-failed', detail, ...bound });
  };
  if ((await servedState(await deps.served.holder(key), deps.live)) !== 'free') return used('this payment has already been used for a request');
  const client = clientOf(req);
  const behind = (s: Shed) => {
    deps.breakers.release(slug);
    return json(
      503,
      { error: 'settlement is behind right now; nothing was charged', reason: s.reason, retry: 'send the same request with the same credential after Retry-After seconds' },
      { 'retry-after': String(s.retryAfterSeconds) },
    );
  };
  // Settlement behind: turned away before anything is verified, read or charged; the credential stays good.
  const shed = await deps.shedding?.(credential.request, client);
  if (shed !== undefined) {
    deps.metrics.paymentShed(credential.request.paymentRequirements.network, shed.reason);
    return behind(shed);
  }
  // A body is read only for a credential whose signature checks: a forged one is refused before a byte of it is.
  if (deps.verify && sendsBody(req) && !hooks.signatureChecked) {
    const verdict = await deps.verify(credential.request);
    if (!verdict.isValid && SIGNATURE_REASONS.has(verdict.invalidReason ?? '')) return used(`payment refused: ${verdict.invalidReason}`);
  }
  // An MPP credential must answer a challenge bound to this very body.
  const digest = await postedDigest(req);
  if (digest !== undefined) bound = { digest };
  const otherBody = credential.kind === 'mpp' ? bodyMismatch(credential.challenge.digest, digest) : undefined;
  if (otherBody !== undefined) return used(otherBody);
  // The upstream call is made ready first: a request it can only refuse is refused before anything is charged.
  const upstream = await prepareUpstream(deps, merchant, req, upstreamPath);
  if (!upstream.ok) {
    deps.breakers.release(slug);
    return json(upstream.error.status, { error: `${upstream.error.message}; nothing was charged` });
  }

  const settlement = await deps.settle(credential.request, client);
  // Turned away at the settlement queue's door (counted there): as the early 503, nothing was charged.
  if (!settlement.success && settlement.errorReason === SETTLEMENT_SHED) return behind(shedOf(settlement));
  if (settlement.success || settlement.status === 'pending') hooks.onCharged?.();
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
  if (!settlement.success && SETTLEMENT_DOWN.has(settlement.errorReason ?? '')) {
    // Settled through remote facilitators, none of which could answer: our outage, not the buyer's payment.
    deps.breakers.release(slug);
    const unknown = settlement.errorReason === GatewayReason.settlementUnknown;
    return json(
      503,
      {
        error: unknown ? 'the payment could not be confirmed settled or not: the settlement service is not answering' : 'the settlement service is unavailable right now; nothing was charged',
        code: settlement.errorReason,
        retry: 'send the same request with the same credential; it will not be charged twice',
      },
      { 'retry-after': String(retryAfterOf(settlement)) },
    );
  }
  if (!settlement.success) {
    deps.breakers.release(slug);
    return challenge(deps, req, merchant, route, terms, credential, deps.now(), {
      settle: settlement,
      problem: 'verification-failed',
      detail: `payment refused: ${settlement.errorReason ?? 'unknown'}`,
      ...bound,
    });
  }
  // Claimed as `serving` (durably) before the upstream is called: a crash from here on leaves the credential redeemable.
  let claim: Awaited<ReturnType<typeof claimForServing>>;
  try {
    claim = await claimForServing(deps.served, key, deps.live);
  } catch (err) {
    // The store cannot write (a full disk): the payment settled, nothing was claimed, so the credential stays good.
    deps.log.error('could not claim a settled payment for service', { payment: key, error: err });
    return json(
      502,
      {
        error: 'the gateway could not record your settled payment; nothing else was charged',
        transaction: settlement.transaction,
        network: settlement.network,
        retry: 'send the same request with the same credential; it will not be charged again',
      },
      paymentHeaders,
    );
  }
  if (!claim) return used('this payment has already been used for a request');

  // From here on the buyer has paid: whatever goes wrong answers 502 with the settlement, and the credential stays good.
  const failedAfterPayment = async (error: string): Promise<HttpResponse> => {
    deps.log.warn('upstream failed after payment', { payment: key, merchant: slug, route: route.route, transaction: settlement.transaction, error });
    await releaseServing(deps.served, claim).catch((err: unknown) => deps.log.error('could not release a served claim', { payment: key, error: err }));
    return json(
      502,
      {
        error: 'the merchant upstream failed after your payment settled',
        transaction: settlement.transaction,
        network: settlement.network,
        retry: 'send the same request with the same credential; it will not be charged again',
      },
      paymentHeaders,
    );
  };
  try {
    const result = await upstream.value();
    const answer = result.ok ? answerable(result) : undefined;
    deps.metrics.upstreamCall(slug, result.ok ? result.status : 'error', result.latencyMs / 1000);
    const upstreamFailed = answer === undefined || answer.status >= 500;
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
    void deps.records.put(`${String(record.at).padStart(15, '0')}-${claim.id}`, record).catch((err: unknown) => deps.log.error('could not record a paid request', { payment: key, error: err }));
    if (upstreamFailed) return await failedAfterPayment(!result.ok ? result.error : `status ${result.status}`);
    const response: HttpResponse = { status: answer.status, headers: paidAnswerHeaders(answer.headers, paymentHeaders), body: answer.status === 204 ? new Uint8Array(0) : answer.body };
    await hooks.beforeServed?.(response);
    // The payment is spent once the answer is ready: durably, before it goes out.
    if (!(await markServed(deps.served, claim))) return used('this payment has already been used for a request');
    // Counted once per payment: a served payment's claim is kept, so the credential buys nothing more.
    deps.metrics.revenue(slug, credential.kind, Number(route.priceUsd));
    return response;
  } catch (err) {
    deps.breakers.release(slug);
    return failedAfterPayment(err instanceof Error ? err.message : String(err));
  }
}

/** Whose share of the settlement queue a request draws on: its address (IPv6: its /64), as the rate limits key it. */
function clientOf(req: HttpRequest): string {
  return ipRateLimitKey(req.remoteIp);
}

/** The backpressure of a settle answer that turned a payment away at the queue's door. */
function shedOf(settlement: SettleResponse): Shed {
  const reason = settlement.extra?.reason;
  return { reason: typeof reason === 'string' ? (reason as Shed['reason']) : 'queue_full', retryAfterSeconds: retryAfterOf(settlement) };
}

/** Reasons of a settlement that did not happen because the settlement service is down (503), not the payment refused. */
const SETTLEMENT_DOWN = new Set<string>([GatewayReason.settlementUnavailable, GatewayReason.settlementUnknown, GatewayReason.contractPayerWaits]);

/** The seconds a 503 of a down settlement service asks the buyer to wait (1 to 60). */
function retryAfterOf(settlement: SettleResponse): number {
  const s = Number(settlement.extra?.retryAfterSeconds);
  return Number.isInteger(s) ? Math.min(60, Math.max(1, s)) : 5;
}

/** What a caller of `paid` may add: its signature already checked, and hooks on the payment's outcome. */
interface PaidHooks {
  /** The credential's signature was checked before its body was read (the caller did it). */
  signatureChecked?: boolean;
  /** The payment settled (or was broadcast and is pending): it is charged. */
  onCharged?: () => void;
  /** The upstream's answer is ready and about to be sent, before the payment is marked served. */
  beforeServed?: (response: HttpResponse) => Promise<void>;
}

/** Header on an answer replayed for a repeated payment identifier. */
const REPLAYED_HEADER = 'idempotent-replayed';

/**
 * An x402 payment, with its `payment-identifier` id if it carries one (see `payment-ids.ts`): a route that requires an
 * id refuses a payment without one (400); the same id with the same request and terms gets the recorded answer, or
 * runs on the payment first bound to the id (never settling this one too); with anything else it gets 409.
 */
async function paidWithId(
  deps: PaywallDeps,
  req: HttpRequest,
  merchant: Merchant,
  route: MerchantRoute,
  terms: RouteTerms,
  credential: Extract<Credential, { kind: 'x402' }>,
  upstreamPath: string,
): Promise<HttpResponse> {
  const payment = credential.request.paymentPayload;
  const pid = paymentIdentifierOf(payment);
  if (pid.kind === 'invalid') return json(400, { error: `${pid.message}; nothing was charged`, code: 'invalid_payment_identifier' });
  if (pid.kind === 'none') {
    if (route.requirePaymentId === true) {
      return json(400, {
        error: "this route requires a payment identifier: add extensions['payment-identifier'].info.id (16 to 128 letters, digits, '-' or '_') to the payment; nothing was charged",
        code: 'payment_identifier_required',
      });
    }
    return paid(deps, req, merchant, route, terms, credential, upstreamPath);
  }
  const refused = (detail: string) => challenge(deps, req, merchant, route, terms, credential, deps.now(), { problem: 'verification-failed', detail });
  // A credential whose signature is not the payer's learns nothing of the payer's identifiers (the store is not asked
  // whether its id is bound, used or in progress: a forged one would tell which ids a victim used), and, as in
  // `paid`, is refused before its body is read.
  if (deps.verify) {
    const verdict = await deps.verify(credential.request);
    if (!verdict.isValid && SIGNATURE_REASONS.has(verdict.invalidReason ?? '')) return refused(`payment refused: ${verdict.invalidReason}`);
  }
  const body = req.method === 'POST' ? await req.body() : undefined;
  let payer: string;
  try {
    payer = schemeOfPayload(payment.payload).payer(payment.payload);
  } catch {
    return json(400, { error: 'PAYMENT-SIGNATURE: the payload is of no known scheme; nothing was charged', code: 'malformed-credential' });
  }
  const key = paymentIdKey(payer, pid.id);
  const fingerprint = paymentIdFingerprint({
    merchant: merchant.slug,
    route: route.route,
    method: boundMethod(req.method),
    path: req.path,
    query: req.query,
    body,
    accepted: credential.request.paymentRequirements,
  });
  const turn = await deps.paymentIds.turn(key, fingerprint, credential.request);
  if (turn.kind === 'conflict') return json(409, { error: turn.message, code: 'payment_identifier_conflict' });
  if (turn.kind === 'busy') return json(409, { error: turn.message, code: 'payment_identifier_in_progress' }, { 'retry-after': '1' });
  if (turn.kind === 'gone') return json(410, { error: turn.message, code: 'payment_identifier_answer_not_kept' });
  // A request on a payment bound earlier brings a payment of its own: it must be the payer's, valid now, though it
  // is never settled (else anyone knowing a payer's id could collect the payer's answer).
  const bound = turn.kind === 'replay' ? turn.bound : turn.request;
  if (fingerprintOf(bound) !== fingerprintOf(credential.request) && deps.verify) {
    const verdict = await deps.verify(credential.request);
    if (!verdict.isValid) {
      if (turn.kind === 'run') await turn.finish('charged').catch((err: unknown) => deps.log.error('could not free a payment identifier', { error: err }));
      return refused(`payment refused: ${verdict.invalidReason ?? 'invalid'}`);
    }
  }
  if (turn.kind === 'replay') return replayed(turn.answer);
  let charged = false;
  let served = false;
  try {
    return await paid(deps, req, merchant, route, terms, { ...credential, request: turn.request }, upstreamPath, {
      signatureChecked: true,
      onCharged: () => {
        charged = true;
      },
      beforeServed: async (response) => {
        served = true;
        const answer = encodeAnswer(response.status, response.headers ?? {}, response.body, deps.paymentIds.policy.maxBodyBytes);
        await turn.record(answer).catch((err: unknown) => deps.log.error('could not record the answer to a payment identifier', { error: err }));
      },
    });
  } finally {
    await turn.finish(served ? 'served' : charged ? 'charged' : 'not-charged').catch((err: unknown) => deps.log.error('could not release a payment identifier', { error: err }));
  }
}

/** A recorded answer, sent again: the same status, headers and body, marked as a replay. */
function replayed(answer: RecordedAnswer): HttpResponse {
  return { status: answer.status, headers: { ...answer.headers, [REPLAYED_HEADER]: 'true' }, body: Buffer.from(answer.body ?? '', 'base64') };
}

/** Reasons of a credential whose signature is not the payer's: the checks run before a body is read. */
const SIGNATURE_REASONS = new Set<string>(SCHEMES.map((s) => s.reasons.signature));

/**
 * An upstream answer that may be passed on: a final status other than a redirect (never followed, and its Location
 * would name the upstream) and not 304 (conditional requests are not forwarded). Anything else fails the call.
 */
function answerable(result: Extract<UpstreamResult, { ok: true }>): Extract<UpstreamResult, { ok: true }> | undefined {
  const s = result.status;
  if (!Number.isInteger(s) || s < 200 || s > 599 || (s >= 300 && s < 400)) return undefined;
  return result;
}

/** The upstream call of a paid request, ready to make once the payment settles; or its refusal before that. */
async function prepareUpstream(deps: PaywallDeps, merchant: Merchant, req: HttpRequest, path: string): Promise<PreparedCall> {
  const upstream = merchant.upstream;
  if (upstream.kind === 'file') {
    return ok(async (): Promise<UpstreamResult> => {
      const started = performance.now();
      const body = await deps.readFile(upstream.sha256);
      if (!body) return { ok: false, error: `file ${upstream.sha256} is missing`, latencyMs: performance.now() - started };
      return { ok: true, status: 200, headers: { 'content-type': upstream.contentType }, body, latencyMs: performance.now() - started };
    });
  }
  let url: string | undefined;
  if (upstream.kind === 'url') {
    const confined = confinedUpstreamUrl(upstream.baseUrl, path, req.query);
    if (!confined.ok) return refusal('invalid_input', confined.error.message, 400);
    url = confined.value;
  }
  const body = req.method === 'POST' ? await req.body() : undefined;
  const request = { method: req.method === 'HEAD' ? 'GET' : req.method, path, query: req.query, headers: req.headers, ...(body ? { body } : {}) };
  if (upstream.kind === 'internal') return deps.internalUpstream(upstream.name, request);
  const limits = { timeoutMs: deps.upstreamTimeoutMs, maxBytes: deps.upstreamMaxBytes };
  const target = url as string;
  return ok(() => forwardToUpstream(target, upstream.secretHeaders, request, deps.dispatcher, limits));
}

/** x402 answers with PAYMENT-RESPONSE; MPP with a signed Payment-Receipt once settled. */
async function paymentHeadersFor(deps: PaywallDeps, credential: Extract<Credential, { kind: 'x402' | 'mpp' }>, settlement: SettleResponse): Promise<Record<string, string>> {
  if (credential.kind === 'x402') return paymentResponseHeader(settlement);
  if (!settlement.success) return {};
  const signed = await signReceipt(
    { status: 'success', method: 'evm', reference: settlement.transaction as Hex, timestamp: new Date(deps.now()).toISOString(), challengeId: credential.challenge.id, chainId: credential.chainId },
    deps.receiptKey,
  );
  if (!signed.ok) return {};
  const encoded = encodeReceipt(signed.value);
  return encoded.ok ? { 'Payment-Receipt': encoded.value } : {};
}
