import { uncharged } from '../../protocol/result.ts';
import type { HttpResponse } from '../../http/server.ts';
import { GUARD_REFUSAL } from '../upstream-guard/preflight.ts';
import { unchargedAnswer } from './answers.ts';

/**
 * The upstream guard would refuse the merchant's upstream (`upstream-guard/preflight.ts`): answered as an open breaker
 * is, before anyone pays (no 402 offered; a credential presented anyway is not settled).
 */
export function guardRefused(slug: string): HttpResponse {
  return unchargedAnswer(uncharged('merchant_unavailable', `merchant '${slug}' is unavailable: ${GUARD_REFUSAL}`, 503).error);
}
