import type { PaymentRequirements, Permit2Payload } from '../../protocol/x402/types.ts';
import { fail, pass, sameAddress, VALIDITY_BUFFER_SECONDS, type CheckResult } from '../../verify/checks.ts';
import { Permit2Reason } from '../../verify/reasons.ts';

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
