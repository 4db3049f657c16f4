/** The registry's refusals: a status, the code that follows it, and the message (see `registry.ts`). */
import type { Err, HttpFailure } from '../../protocol/result.ts';
import type { UploadBudget } from './uploads.ts';

export type RegistryFailureStatus = 400 | 403 | 404 | 409 | 413;

/**
 * A refusal's code follows its status: 400 `invalid_registration`, 403 `forbidden`, 404 `not_found`, 409 `conflict`,
 * 413 `over_budget` (an upload over the wallet's or the gateway's disk budget; `budget` says which).
 */
export type RegistryRefusalCode = 'invalid_registration' | 'forbidden' | 'not_found' | 'conflict' | 'over_budget';

const REFUSAL_CODES: Readonly<Record<RegistryFailureStatus, RegistryRefusalCode>> = {
  400: 'invalid_registration',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  413: 'over_budget',
};

export function refuse(status: RegistryFailureStatus, message: string): Err<HttpFailure<RegistryRefusalCode> & { status: RegistryFailureStatus }> {
  return { ok: false, error: { code: REFUSAL_CODES[status], message, status } };
}

export function overBudget(budget: UploadBudget, message: string): Err<HttpFailure<RegistryRefusalCode> & { status: 413; budget: UploadBudget }> {
  return { ok: false, error: { code: 'over_budget', message, status: 413, budget } };
}
