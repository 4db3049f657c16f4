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
