/**
 * The x402 extensions gate402 implements, in one place: `/supported` lists their keys, and a paid route's 402
 * declares each one that applies to it.
 */
import { PAYMENT_IDENTIFIER, paymentIdentifierDeclaration } from './payment-identifier.ts';

/** The keys `/supported` lists. */
export const IMPLEMENTED_EXTENSIONS: readonly string[] = [PAYMENT_IDENTIFIER];

/** The `extensions` of a paid route's 402, from what the route asks of its buyers. */
export function routeExtensions(route: { requirePaymentId?: boolean }): Record<string, unknown> {
  return { [PAYMENT_IDENTIFIER]: paymentIdentifierDeclaration(route.requirePaymentId === true) };
}
