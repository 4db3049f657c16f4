/** The states of a stock order, in a module without imports: the web front end follows orders by them too. */

/** Where an order is; each is written to LMDB as it is entered. */
export type OrderState =
  | 'settling'
  | 'settleWaiting'
  | 'checkingPool'
  | 'quoting'
  | 'swapping'
  | 'confirmingSwap'
  | 'delivered'
  | 'refunding'
  | 'refundWaiting'
  | 'confirmingRefund'
  | 'refunded'
  | 'rejected';

/** The order is over: nothing more will be sent for it. */
export const FINAL_ORDER_STATES: ReadonlySet<string> = new Set(['delivered', 'refunded', 'rejected']);

/** Why a paid order is refunded: the first step that failed after the payment settled (the refunds metric's label). */
export const REFUND_REASONS = ['pool_check_failed', 'pool_mismatch', 'quote_failed', 'below_slippage_floor', 'swap_would_revert', 'swap_not_sent', 'swap_reverted'] as const;

/**
 * The order of an order's states, for writes that must never take it backwards (see `src/store/record-order.ts`):
 * paying, then each step of the swap, then the refund (whose states loop while a refund is retried: one rank), then
 * the ends. Of the ends, what moved money on chain ranks above what did not: rejected < refunded < delivered.
 */
export const ORDER_STATE_RANK: Readonly<Record<OrderState, number>> = {
  settling: 0,
  settleWaiting: 0,
  checkingPool: 1,
  quoting: 2,
  swapping: 3,
  confirmingSwap: 4,
  refunding: 5,
  refundWaiting: 5,
  confirmingRefund: 5,
  rejected: 6,
  refunded: 7,
  delivered: 8,
};
