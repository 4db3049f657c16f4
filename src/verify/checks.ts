import type { InvalidReason } from './reasons.ts';

/**
 * What a pure check of a payment says: pass, or the first failure. The checks of each payment scheme (in
 * src/schemes/, in the reference facilitator's order) and the payment policy answer in this form; they never touch a
 * chain, a clock or a key: `now` (unix seconds) comes in as a parameter.
 */
export type CheckResult = { ok: true } | { ok: false; reason: InvalidReason; message: string };

export const pass: CheckResult = { ok: true };
export const fail = (reason: InvalidReason, message: string): CheckResult => ({ ok: false, reason, message });
export const sameAddress = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

/** Seconds an authorization must still be valid for when it is checked: room to broadcast and mine. */
export const VALIDITY_BUFFER_SECONDS = 6n;
