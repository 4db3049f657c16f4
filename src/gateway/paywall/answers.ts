/** The paywall's own answers (not the 402s, which the doors compose): JSON bodies, uncharged refusals, replays. */
import type { HttpResponse } from '../../http/server.ts';
import type { Shed } from '../../ports/settlement.ts';
import { uncharged, unchargedText, type Uncharged } from '../../protocol/result.ts';
import type { SettleResponse } from '../../protocol/x402/types.ts';
import type { RecordedAnswer } from './payment-ids.ts';

export const json = (status: number, value: unknown, headers: Record<string, string> = {}): HttpResponse => ({
  status,
  headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers },
  body: JSON.stringify(value),
});

/** Why the paywall refuses a request before anything is charged (the code is in the body only where `coded`). */
export type PaywallRefusalCode =
  | 'invalid_path'
  | 'invalid_query'
  | 'merchant_unavailable'
  | 'settlement_behind'
  | 'settlement_unavailable'
  | 'upstream_refused'
  | 'invalid_payment_identifier'
  | 'payment_identifier_required'
  | 'malformed-credential';

/** An uncharged refusal as answered: `error` says nothing was charged; `more` follows it in the body. */
export function unchargedAnswer(refusal: Uncharged, more: Record<string, unknown> = {}, headers: Record<string, string> = {}): HttpResponse {
  return json(refusal.status, { error: unchargedText(refusal.message), ...more }, headers);
}

/** An uncharged refusal whose body names its code (after `error`). */
export function codedRefusal(code: PaywallRefusalCode, message: string, status: number): HttpResponse {
  return unchargedAnswer(uncharged(code, message, status).error, { code });
}

/** Settlement is behind: turned away before anything is verified, read or charged; the credential stays good. */
export function behind(shed: Shed): HttpResponse {
  const refused = uncharged('settlement_behind', 'settlement is behind right now', 503).error;
  return unchargedAnswer(refused, { reason: shed.reason, retry: 'send the same request with the same credential after Retry-After seconds' }, { 'retry-after': String(shed.retryAfterSeconds) });
}

/** The backpressure of a settle answer that turned a payment away at the queue's door. */
export function shedOf(settlement: SettleResponse): Shed {
  const reason = settlement.extra?.reason;
  return { reason: typeof reason === 'string' ? (reason as Shed['reason']) : 'queue_full', retryAfterSeconds: retryAfterOf(settlement) };
}

/** The seconds a 503 of a down settlement service asks the buyer to wait (1 to 60). */
export function retryAfterOf(settlement: SettleResponse): number {
  const s = Number(settlement.extra?.retryAfterSeconds);
  return Number.isInteger(s) ? Math.min(60, Math.max(1, s)) : 5;
}

const RETRY_UNCHARGED = 'send the same request with the same credential; it will not be charged again';

/** The settlement service could not answer: our outage, not the buyer's payment (503). */
export function settlementDown(settlement: SettleResponse, unknown: boolean): HttpResponse {
  const error = unknown
    ? 'the payment could not be confirmed settled or not: the settlement service is not answering'
    : unchargedText(uncharged('settlement_unavailable', 'the settlement service is unavailable right now', 503).error.message);
  const retry = 'send the same request with the same credential; it will not be charged twice';
  return json(503, { error, code: settlement.errorReason, retry }, { 'retry-after': String(retryAfterOf(settlement)) });
}

/**
 * The store did not answer (the database restarting or unreachable): this request was turned away before it could
 * charge anything (503, Retry-After). It does not say "nothing was charged" of the credential: an earlier request with
 * it may have been, and that cannot be read until the store is back; the same request then gets that payment's answer.
 */
export function storeUnavailable(): HttpResponse {
  const retry = 'send the same request (with the same credential, if it carries one) after Retry-After seconds: a payment is never charged twice, and one charged before is served then';
  return json(503, { error: 'the gateway cannot reach its records right now; this request charged nothing', code: 'store_unavailable', retry }, { 'retry-after': '2' });
}

/** Broadcast, not yet confirmed (202): the same credential gets the resource once it confirms. */
export function pending(settlement: SettleResponse, receipt: Record<string, string>): HttpResponse {
  const detail = 'the payment is broadcast but not yet confirmed; send the same request with the same credential to receive the resource once it confirms, without paying again';
  return json(202, { status: 'pending', transaction: settlement.transaction, network: settlement.network, detail }, receipt);
}

/** The buyer paid and was not served (502): the answer names the settlement; the credential stays good. */
export function paidUnserved(error: string, settlement: SettleResponse, receipt: Record<string, string>): HttpResponse {
  return json(502, { error, transaction: settlement.transaction, network: settlement.network, retry: RETRY_UNCHARGED }, receipt);
}

/** Header on an answer replayed for a repeated payment identifier. */
export const REPLAYED_HEADER = 'idempotent-replayed';

/** A recorded answer, sent again: the same status, headers and body, marked as a replay. */
export function replayed(answer: RecordedAnswer): HttpResponse {
  return { status: answer.status, headers: { ...answer.headers, [REPLAYED_HEADER]: 'true' }, body: Buffer.from(answer.body ?? '', 'base64') };
}
