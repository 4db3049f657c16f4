/**
 * `/m/{slug}/{route}[/appended/segments]`: 402 until paid, then the upstream's answer, verbatim.
 *
 * A request is checked (path, query, route, method), read by the doors (`front-door/`: the first that recognises
 * its payment headers answers), admitted by the merchant's breaker, and then either answered with the one 402 the
 * doors compose, or bought: `paid` below, a list of named steps (`paid-steps.ts`), or first the x402 payment
 * identifier's turn (`paid-with-id.ts`).
 */
import type { Door, Reading } from '../../front-door/door.ts';
import { PaymentRequired } from '../../front-door/payment-required.ts';
import type { HttpHandler, HttpRequest, HttpResponse } from '../../http/server.ts';
import { uncharged } from '../../protocol/result.ts';
import type { BreakerTicket } from '../../resilience/circuit-breaker.ts';
import { isStoreUnavailable } from '../../store/store-unavailable.ts';
import { nonceKeyOf } from '../../schemes/payment-identity.ts';
import { findRoute, type Merchant } from '../catalog/merchant.ts';
import { CHANNEL_PROTOCOL, channelKeyOf, type ChannelCredential } from '../../front-door/batch-settlement.ts';
import { json, storeUnavailable, unchargedAnswer } from './answers.ts';
import { channelPaid } from './channel-paid.ts';
import { channelRefund, isChannelRefund } from './channel-refund.ts';
import type { PaywallDeps } from './deps.ts';
import { guardRefused } from './guard-refusal.ts';
import { bodyBound, clientOf, claimed, postedDigest, preparedUpstream, sendsBody, served, settled, signedBeforeBody, unserved, unshed, type PaidHooks, type Purchase } from './paid-steps.ts';
import { paidWithId } from './paid-with-id.ts';
import { RouteTermsMemo } from './route-terms.ts';
import { checkQuery, confinePath, upstreamRelativePath } from './upstream-path.ts';

export type { PaidRequestRecord, PaywallDeps } from './deps.ts';

/** HEAD never spends a credential: it answers what an unpaid GET would, whatever payment headers it carries. */
const NONE: Reading = { kind: 'none' };

export function paidRouteHandler(deps: PaywallDeps): HttpHandler {
  const terms = new RouteTermsMemo(deps.networks, deps.channels?.offers);
  const required = new PaymentRequired({ doors: deps.doors, challengeTtlMs: deps.challengeTtlMs, now: deps.now, counted: (protocol) => deps.metrics.challengeIssued(protocol) });
  // Not `async`: the unpaid 402 is answered synchronously, before the server's route callback returns.
  const handle = (req: HttpRequest, slug: string, merchant: Merchant | undefined): Promise<HttpResponse> | HttpResponse => {
    if (!merchant) return json(404, { error: `no merchant '${slug}'` });
    // The path is checked before anything else: a path that could leave the route is refused, whatever is paid.
    const confined = confinePath(req.params['*'] ?? '');
    if (!confined.ok) return unchargedAnswer(uncharged('invalid_path', confined.error.message, 400).error);
    const badQuery = checkQuery(req.query);
    if (badQuery) return unchargedAnswer(uncharged('invalid_query', badQuery.error.message, 400).error);
    const { route: routeName, segments } = confined.value;
    const route = findRoute(merchant, routeName);
    if (!route) return json(404, { error: `merchant '${slug}' has no route '${routeName.slice(0, 64)}'` });
    if (!route.methods.includes(req.method === 'HEAD' ? 'GET' : (req.method as 'GET' | 'POST'))) {
      return json(405, { error: `${req.method} is not allowed here` }, { allow: route.methods.join(', ') });
    }
    const t = terms.of(merchant, route);
    let door: Door | undefined;
    let reading = NONE;
    if (req.method !== 'HEAD') {
      for (door of deps.doors) {
        reading = door.read(req, t);
        if (reading.kind !== 'none') break;
      }
    }
    // A channel refund calls no upstream: it is taken whatever the merchant's guard and breaker say.
    if (reading.kind === 'credential' && door && deps.channels && isChannelRefund(reading.credential)) {
      return channelRefund({ deps, required, req, terms: t, door, credential: reading.credential }, deps.channels);
    }
    // An upstream this gateway's guard refuses is refused before anyone pays for it (see upstream-guard/preflight.ts).
    if (merchant.upstream.kind === 'url' && deps.upstream.preflight?.refusesNow(merchant.upstream.baseUrl)) return guardRefused(slug);
    // An upstream known to be failing is refused before anyone pays for it; a paid request holds an admission.
    const ticket = reading.kind === 'credential' ? deps.breakers.admit(slug) : undefined;
    if (ticket === undefined && (reading.kind === 'credential' || !deps.breakers.admits(slug))) {
      const closed = uncharged('merchant_unavailable', `merchant '${slug}' is unavailable right now`, 503).error;
      return unchargedAnswer(closed, {}, { 'retry-after': String(deps.breakers.retryAfterSeconds(slug)) });
    }
    if (ticket !== undefined && reading.kind === 'credential' && door) {
      const p: Purchase = {
        deps,
        required,
        req,
        merchant,
        route,
        terms: t,
        door,
        credential: reading.credential,
        key: reading.credential.protocol === CHANNEL_PROTOCOL ? channelKeyOf(reading.credential as ChannelCredential) : nonceKeyOf(reading.credential.request),
        client: clientOf(req),
        upstreamPath: upstreamRelativePath(route.route, segments),
        ticket,
      };
      const channels = deps.channels;
      if (p.credential.protocol === CHANNEL_PROTOCOL && channels) return holding(ticket, () => channelPaid(p, channels));
      return holding(ticket, () => (p.door.identifiesPayments ? paidWithId(p) : paid(p)));
    }
    // Unpaid or refused: a 402, for which a POST's challenge is bound to its body, read first.
    const method = req.method === 'POST' ? 'POST' : 'GET';
    if (reading.kind === 'refused') {
      const refusal = reading.refusal;
      if (sendsBody(req)) return postedDigest(req).then((digest) => required.refused(t, { method, path: req.path, digest }, refusal));
      return required.refused(t, { method, path: req.path, digest: undefined }, refusal);
    }
    if (sendsBody(req)) return postedDigest(req).then((digest) => required.unpaid(t, { method, path: req.path, digest }));
    return required.unpaid(t, { method, path: req.path, digest: undefined });
  };
  return (req) => {
    const slug = req.params.slug ?? '';
    const merchant = deps.merchant(slug);
    const answer = merchant instanceof Promise ? merchant.then((m) => handle(req, slug, m)) : handle(req, slug, merchant);
    return answer instanceof Promise ? answer.catch(unavailableOrThrow) : answer;
  };
}

/**
 * A purchase that met a store that does not answer (its merchant, served claim or payment could not be read or
 * written) before anything was charged: 503 with Retry-After. From the settlement on, the steps answer their own
 * failures (`claimed`, `served`: 502 naming the settlement), so what reaches here charged nothing. Anything else is
 * a fault of ours, answered 500 by the server (and logged with its stack).
 */
function unavailableOrThrow(err: unknown): HttpResponse {
  if (isStoreUnavailable(err)) return storeUnavailable();
  throw err;
}

/** However the purchase ends (an answer, a body too large, a client gone, a throw), its breaker admission is given back, once. */
async function holding(ticket: BreakerTicket, buy: () => Promise<HttpResponse>): Promise<HttpResponse> {
  try {
    return await buy();
  } finally {
    ticket.release();
  }
}

/** A payment, bought: each step answers (and the purchase ends there) or hands the next what it needs. */
export async function paid(p: Purchase, hooks: PaidHooks = {}): Promise<HttpResponse> {
  const fresh = await unserved(p);
  if (!fresh.ok) return fresh.error;
  const admitted = await unshed(p);
  if (!admitted.ok) return admitted.error;
  if (!hooks.signatureChecked) {
    const signed = await signedBeforeBody(p);
    if (!signed.ok) return signed.error;
  }
  const bound = await bodyBound(p);
  if (!bound.ok) return bound.error;
  const upstream = await preparedUpstream(p);
  if (!upstream.ok) return upstream.error;
  const settlement = await settled(p, hooks);
  if (!settlement.ok) return settlement.error;
  const claim = await claimed(p, settlement.value);
  if (!claim.ok) return claim.error;
  return served(p, settlement.value, claim.value, upstream.value, hooks);
}
