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
