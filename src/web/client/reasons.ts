/** Why an order was refunded or a payment refused, in words (the API's reason codes, see `src/verify/reasons.ts` and `src/stock/order-desk.ts`). */
import { Permit2Reason, GatewayReason } from '../../verify/reasons.ts';

const WORDS: Readonly<Record<string, string>> = {
  below_slippage_floor: 'The pool price moved against you between the quote and the swap, beyond the slippage bound, so nothing was bought.',
  pool_mismatch: 'The pool could not be verified on chain right before the swap, so nothing was bought.',
  swap_would_revert: 'The swap would have failed on chain (the price moved, or the pool changed), so it was not sent.',
  swap_not_sent: 'The swap could not be sent to the chain.',
  swap_reverted: 'The swap failed on chain (the price moved below your minimum, or its deadline passed).',
  refund_reverted: 'A refund transaction failed on chain; it is being tried again.',
  settlement_failed: 'Your payment did not settle.',
  [Permit2Reason.insufficientBalance]: 'Your wallet does not hold enough stablecoin B for this buy.',
  [Permit2Reason.allowanceRequired]: 'Your wallet has not approved Permit2 for stablecoin B yet (the one-time approval).',
  [Permit2Reason.signature]: 'The payment signature is not valid for this wallet.',
  [Permit2Reason.deadlineExpired]: 'The signed payment expired before it could be settled; sign again.',
  [Permit2Reason.nonceUsed]: 'This signed payment was already used; sign a new one.',
  [Permit2Reason.amountMismatch]: 'The signed amount does not match the price.',
  [Permit2Reason.recipientMismatch]: 'The payment is made out to another address than the gateway asked for.',
  [GatewayReason.nonceInFlight]: 'This payment is already being settled.',
};

/** The words for a reason code (a sentence); an unknown code is named after `fallback`, for whoever reports a problem. */
export function reasonInWords(reason: string | undefined, fallback: string): string {
  if (!reason) return fallback;
  return WORDS[reason] ?? `${fallback.replace(/\.$/, '')} (${reason.replaceAll('_', ' ')}).`;
}
