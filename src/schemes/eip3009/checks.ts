import type { StablecoinInfo } from '../../chain/network-types.ts';
import type { Eip3009Payload, PaymentRequirements } from '../../protocol/x402/types.ts';
import { fail, pass, sameAddress, VALIDITY_BUFFER_SECONDS, type CheckResult } from '../../verify/checks.ts';
import { Eip3009Reason } from '../../verify/reasons.ts';

/** Steps 1 to 3 of EIP-3009: scheme, EIP-712 domain present, network. */
export function checkEip3009Envelope(req: PaymentRequirements, accepted: PaymentRequirements): CheckResult {
  if (req.scheme !== 'exact' || accepted.scheme !== 'exact') return fail(Eip3009Reason.scheme, `scheme must be exact, got ${accepted.scheme}`);
  const name = req.extra?.name;
  const version = req.extra?.version;
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
  if (req.extra?.name !== token.name) return fail(Eip3009Reason.tokenNameMismatch, `the token's EIP-712 name is ${JSON.stringify(token.name)}`);
  if (req.extra?.version !== token.version) return fail(Eip3009Reason.tokenVersionMismatch, `the token's EIP-712 version is ${JSON.stringify(token.version)}`);
  return pass;
}
