import type { Eip3009Payload, PaymentRequirements, Permit2Payload } from '../protocol/x402/types.ts';
import type { StablecoinInfo } from '../chain/network-types.ts';
import { Eip3009Reason, Permit2Reason, type InvalidReason } from './reasons.ts';

/**
 * The pure checks of scheme `exact`, in the reference facilitator's order. Each returns the first failure.
 * Signature recovery, code existence and simulation sit between and after these in the engine; these never
 * touch a chain, a clock or a key: `now` (unix seconds) comes in as a parameter.
 */
export type CheckResult = { ok: true } | { ok: false; reason: InvalidReason; message: string };

const pass: CheckResult = { ok: true };
const fail = (reason: InvalidReason, message: string): CheckResult => ({ ok: false, reason, message });
const sameAddress = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

/** Seconds an authorization must still be valid for when it is checked: room to broadcast and mine. */
export const VALIDITY_BUFFER_SECONDS = 6n;

/** Steps 1 to 3 of EIP-3009: scheme, EIP-712 domain present, network. */
export function checkEip3009Envelope(req: PaymentRequirements, accepted: PaymentRequirements): CheckResult {
  if (req.scheme !== 'exact' || accepted.scheme !== 'exact') return fail(Eip3009Reason.scheme, `scheme must be exact, got ${accepted.scheme}`);
  const name = req.extra?.['name'];
  const version = req.extra?.['version'];
  if (typeof name !== 'string' || typeof version !== 'string') return fail(Eip3009Reason.missingDomain, 'requirements.extra must carry the token EIP-712 name and version');
  if (accepted.network !== req.network) return fail(Eip3009Reason.networkMismatch, `payload is for ${accepted.network}, requirements for ${req.network}`);
  return pass;
}

/**
 * Steps 5 to 8 of EIP-3009 (after the signature): recipient, time window with the 6-second buffer, exact value.
 * Then the domain the client signed against must be the configured token's, which the reference learns only by
 * simulating: a mismatch can never settle.
 */
export function checkEip3009Terms(req: PaymentRequirements, payload: Eip3009Payload, token: StablecoinInfo, now: bigint): CheckResult {
  const a = payload.authorization;
  if (!sameAddress(a.to, req.payTo)) return fail(Eip3009Reason.recipientMismatch, `authorization pays ${a.to}, requirements say ${req.payTo}`);
  if (BigInt(a.validBefore) < now + VALIDITY_BUFFER_SECONDS) return fail(Eip3009Reason.validBefore, `validBefore ${a.validBefore} is too soon (now ${now})`);
  if (BigInt(a.validAfter) > now) return fail(Eip3009Reason.validAfter, `validAfter ${a.validAfter} is in the future (now ${now})`);
  if (BigInt(a.value) !== BigInt(req.amount)) return fail(Eip3009Reason.valueMismatch, `authorization value ${a.value} is not the required ${req.amount}`);
  if (req.extra?.['name'] !== token.name) return fail(Eip3009Reason.tokenNameMismatch, `the token's EIP-712 name is ${JSON.stringify(token.name)}`);
  if (req.extra?.['version'] !== token.version) return fail(Eip3009Reason.tokenVersionMismatch, `the token's EIP-712 version is ${JSON.stringify(token.version)}`);
  return pass;
}

/** Every pure Permit2 check, in the reference order, up to (not including) code existence and the signature. */
export function checkPermit2Terms(req: PaymentRequirements, accepted: PaymentRequirements, payload: Permit2Payload, proxy: string, now: bigint): CheckResult {
  if (req.scheme !== 'exact' || accepted.scheme !== 'exact') return fail(Permit2Reason.payloadType, `scheme must be exact, got ${accepted.scheme}`);
  if (accepted.network !== req.network) return fail(Permit2Reason.networkMismatch, `payload is for ${accepted.network}, requirements for ${req.network}`);
  const p = payload.permit2Authorization;
  if (!sameAddress(p.spender, proxy)) return fail(Permit2Reason.spender, `spender must be the exact-permit proxy ${proxy}`);
  if (!sameAddress(p.witness.to, req.payTo)) return fail(Permit2Reason.recipientMismatch, `witness pays ${p.witness.to}, requirements say ${req.payTo}`);
  if (BigInt(p.deadline) < now + VALIDITY_BUFFER_SECONDS) return fail(Permit2Reason.deadlineExpired, `deadline ${p.deadline} is too soon (now ${now})`);
  if (BigInt(p.witness.validAfter) > now) return fail(Permit2Reason.notYetValid, `validAfter ${p.witness.validAfter} is in the future (now ${now})`);
  if (BigInt(p.permitted.amount) !== BigInt(req.amount)) return fail(Permit2Reason.amountMismatch, `permitted amount ${p.permitted.amount} is not the required ${req.amount}`);
  if (!sameAddress(p.permitted.token, req.asset)) return fail(Permit2Reason.tokenMismatch, `permitted token ${p.permitted.token} is not the asset ${req.asset}`);
  return pass;
}

/** Which transfer method requirements ask for: Permit2 when `extra.assetTransferMethod` says so, else EIP-3009. */
export function transferMethodOf(req: PaymentRequirements): 'permit2' | 'eip3009' {
  return req.extra?.['assetTransferMethod'] === 'permit2' ? 'permit2' : 'eip3009';
}
