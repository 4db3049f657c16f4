/**
 * A facilitator `/verify` or `/settle` body whose requirements ask for `batch-settlement`: decoded here, apart from
 * the `exact` codec (whose signed payload shapes are closed). The envelope is checked (version, requirements'
 * fields); the payload is left to the scheme's checks, which answer in the spec's reasons. Pure.
 */
import { err, ok, type Result } from '../../protocol/result.ts';
import type { VerifyRequest } from '../../protocol/x402/types.ts';
import { BATCH_SETTLEMENT_SCHEME } from './domain.ts';

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const AMOUNT = /^[0-9]{1,78}$/;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Whether a decoded JSON body asks for `batch-settlement` (its requirements say so). */
export function asksBatchSettlement(value: unknown): boolean {
  return isObject(value) && isObject(value.paymentRequirements) && value.paymentRequirements.scheme === BATCH_SETTLEMENT_SCHEME;
}

export type BatchRequestProblem = 'invalid_x402_version' | 'invalid_payment_requirements' | 'invalid_payload';

/** The verify request of a `batch-settlement` body, or which part of it is malformed. */
export function decodeBatchRequest(value: unknown): Result<VerifyRequest, BatchRequestProblem> {
  if (!isObject(value) || !isObject(value.paymentPayload) || !isObject(value.paymentRequirements)) return err('invalid_payload', 'paymentPayload and paymentRequirements must be objects');
  const pp = value.paymentPayload;
  const req = value.paymentRequirements;
  if (value.x402Version !== 2 || pp.x402Version !== 2) return err('invalid_x402_version', 'x402Version must be 2');
  if (typeof req.network !== 'string' || !/^eip155:[0-9]{1,20}$/.test(req.network)) return err('invalid_payment_requirements', '/paymentRequirements/network: must be eip155:<chain id>');
  if (typeof req.asset !== 'string' || !ADDRESS.test(req.asset)) return err('invalid_payment_requirements', '/paymentRequirements/asset: must be an address');
  if (typeof req.payTo !== 'string' || !ADDRESS.test(req.payTo)) return err('invalid_payment_requirements', '/paymentRequirements/payTo: must be an address');
  if (typeof req.amount !== 'string' || !AMOUNT.test(req.amount)) return err('invalid_payment_requirements', '/paymentRequirements/amount: must be a decimal integer string');
  if (typeof req.maxTimeoutSeconds !== 'number' || !Number.isInteger(req.maxTimeoutSeconds) || req.maxTimeoutSeconds <= 0) {
    return err('invalid_payment_requirements', '/paymentRequirements/maxTimeoutSeconds: must be a positive integer');
  }
  if (req.extra !== undefined && !isObject(req.extra)) return err('invalid_payment_requirements', '/paymentRequirements/extra: must be an object');
  if (!isObject(pp.accepted) || typeof pp.accepted.scheme !== 'string' || typeof pp.accepted.network !== 'string') {
    return err('invalid_payload', '/paymentPayload/accepted: must name a scheme and a network');
  }
  if (!isObject(pp.payload)) return err('invalid_payload', '/paymentPayload/payload: must be an object');
  return ok({ x402Version: 2, paymentPayload: pp, paymentRequirements: { ...req, extra: req.extra ?? {} } } as unknown as VerifyRequest);
}
