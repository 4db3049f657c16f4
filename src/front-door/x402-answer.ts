/**
 * The x402 headers of the front door's answers: the 402's `PAYMENT-REQUIRED` (offers for a resource) and a settled
 * payment's `PAYMENT-RESPONSE`. The marketplace's paid routes and the stock buy both answer with these.
 */
import { encodePaymentRequiredHeader, encodePaymentResponseHeader, PAYMENT_REQUIRED_HEADER, PAYMENT_RESPONSE_HEADER } from '../protocol/x402/headers.ts';
import type { PaymentRequired, PaymentRequirements, ResourceInfo, SettleResponse } from '../protocol/x402/types.ts';

/**
 * The 402's x402 challenge: `accepts` for `resource`, with `error` saying why a credential was refused, and the
 * x402 extensions' declarations for the resource (`protocol/x402/extensions`), when there are any.
 */
export function paymentRequired(resource: ResourceInfo, accepts: PaymentRequirements[], error?: string, extensions?: Record<string, unknown>): PaymentRequired {
  return { x402Version: 2, ...(error !== undefined ? { error } : {}), resource, accepts, ...(extensions && Object.keys(extensions).length > 0 ? { extensions } : {}) };
}

/** The `PAYMENT-REQUIRED` header carrying `required`. */
export function paymentRequiredHeader(required: PaymentRequired): Record<typeof PAYMENT_REQUIRED_HEADER, string> {
  return { [PAYMENT_REQUIRED_HEADER]: encodePaymentRequiredHeader(required) };
}

/** The `PAYMENT-RESPONSE` header of a settlement (sent on success, and on a 402 whose payment failed to settle). */
export function paymentResponseHeader(settlement: SettleResponse): Record<typeof PAYMENT_RESPONSE_HEADER, string> {
  return { [PAYMENT_RESPONSE_HEADER]: encodePaymentResponseHeader(settlement) };
}
