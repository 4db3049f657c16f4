import type { Address } from 'viem';
import { err, ok, type Err, type Failure, type Ok } from '../protocol/result.ts';
import type { InvalidReason } from './reasons.ts';

/**
 * What a pure check of a payment says: pass, or the first failure. The checks of each payment scheme (in
 * src/schemes/, in the reference facilitator's order) and the payment policy answer in this form; they never touch a
 * chain, a clock or a key: `now` (unix seconds) comes in as a parameter. A failure's code is the protocol's reason code.
 */
export type CheckResult = Ok<undefined> | Err<Failure<InvalidReason>>;

/** A payment refused by a check: the reason code, its message, and the payer once it is known. */
export interface PaymentRefusal extends Failure<InvalidReason> {
  payer?: Address;
}

export const pass: CheckResult = ok(undefined);
export const fail = (reason: InvalidReason, message: string): CheckResult => err(reason, message);
/** A check's refusal, naming the payer it is about. */
export const refusedPayer = (failure: Failure<InvalidReason>, payer: Address | undefined): Err<PaymentRefusal> => ({
  ok: false,
  error: { code: failure.code, message: failure.message, ...(payer ? { payer } : {}) },
});
export const sameAddress = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

/** Seconds an authorization must still be valid for when it is checked: room to broadcast and mine. */
export const VALIDITY_BUFFER_SECONDS = 6n;
