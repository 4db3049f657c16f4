/**
 * The x402 `payment-identifier` extension: a buyer's idempotency key. A 402 declares it per route (whether the route
 * requires one); a payment carries it as `extensions['payment-identifier'].info.id`, 16 to 128 characters of letters,
 * digits, `-` and `_`. The declaration and the id check are the official package's, so buyers using its client
 * helpers (`appendPaymentIdentifierToExtensions`) and gate402 agree on both. Pure.
 */
import { declarePaymentIdentifierExtension, isValidPaymentId, PAYMENT_ID_MAX_LENGTH, PAYMENT_ID_MIN_LENGTH, PAYMENT_IDENTIFIER } from '@x402/extensions/payment-identifier';
import type { PaymentPayload } from '../types.ts';

export { PAYMENT_IDENTIFIER };

/** The `payment-identifier` entry of a 402's `extensions`: `required` when the route refuses payments without one. */
export function paymentIdentifierDeclaration(required: boolean): Record<string, unknown> {
  return { ...declarePaymentIdentifierExtension(required) };
}

export type PaymentIdentifier = { kind: 'none' } | { kind: 'id'; id: string } | { kind: 'invalid'; message: string };

/**
 * The identifier a payment carries. `none` when the payment has no `payment-identifier` entry or the entry has no
 * `id` (the official client echoes the server's declaration whether or not it adds an id); `invalid` when the id is
 * there but not a string of the allowed length and characters.
 */
export function paymentIdentifierOf(payment: PaymentPayload): PaymentIdentifier {
  const entry = payment.extensions?.[PAYMENT_IDENTIFIER];
  if (entry === undefined || entry === null) return { kind: 'none' };
  if (typeof entry !== 'object' || Array.isArray(entry)) return { kind: 'invalid', message: `extensions.${PAYMENT_IDENTIFIER} must be an object` };
  const info = (entry as { info?: unknown }).info;
  if (info === undefined) return { kind: 'none' };
  if (info === null || typeof info !== 'object' || Array.isArray(info)) return { kind: 'invalid', message: `extensions.${PAYMENT_IDENTIFIER}.info must be an object` };
  const id = (info as { id?: unknown }).id;
  if (id === undefined) return { kind: 'none' };
  if (typeof id !== 'string' || !isValidPaymentId(id)) {
    return { kind: 'invalid', message: `extensions.${PAYMENT_IDENTIFIER}.info.id must be ${PAYMENT_ID_MIN_LENGTH} to ${PAYMENT_ID_MAX_LENGTH} letters, digits, '-' or '_'` };
  }
  return { kind: 'id', id };
}
