import type { Address, Hex } from 'viem';
import type { SignedTx } from '../tx/trail.ts';
import type { SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import { FINAL_ORDER_STATES, ORDER_STATE_RANK, type OrderState } from './order-states.ts';
import type { Err, Failure, Ok } from '../protocol/result.ts';

export { FINAL_ORDER_STATES, ORDER_STATE_RANK, type OrderState } from './order-states.ts';

/** The durable record of one stock buy. */
export interface StockOrder {
  id: string;
  state: OrderState;
  network: string;
  symbol: string;
  stock: Address;
  stockDecimals: number;
  payer: Address;
  /** Who receives the shares (the payer unless the buy named another address). */
  recipient: Address;
  /** Stablecoin B atomic units paid (and, on failure, refunded). */
  amount: string;
  payment: VerifyRequest;
  /** The payment's on-chain nonce key: one order per payment, ever. */
  paymentKey: string;
  /** Shares the 402 quoted, and the floor below which the swap does not go. */
  quotedShares: string;
  minShares: string;
  /** The block the quote was read at: a payment that moved is looked for from there. Absent in older records. */
  sinceBlock?: string;
  /** The on-chain re-quote taken right before the swap. */
  requotedShares?: string;
  settlement?: SettleResponse;
  /** Every signed version of the swap (replacements add one); the last is current. */
  swapTxs: SignedTx[];
  swapTx?: Hex;
  /** Shares the swap delivered to `recipient`, read from the stock token's Transfer log. */
  delivered?: string;
  refundTxs: SignedTx[];
  refundTx?: Hex;
  /** Why the order was refunded or rejected. */
  failure?: { reason: string; message: string };
  /** Refund attempts that could not be sent yet. */
  refundAttempts: number;
  createdAt: number;
  updatedAt: number;
}

/** Why an order step failed: its reason code and message, and the order as the step left it (absent: as it came in). */
export interface OrderFailure extends Failure {
  order?: StockOrder;
}

/** What a step returns: the order as it left it, or why it failed. */
export type OrderStep = Ok<StockOrder> | Err<OrderFailure>;

/** A step's failure for `code`, with the order as the step left it. */
export function orderFailed(code: string, message: string, order?: StockOrder): Err<OrderFailure> {
  return { ok: false, error: { code, message, ...(order ? { order } : {}) } };
}

/** Ranks of unfinished orders are below this; a finished order's rank is this plus its state's. */
const FINISHED_RANK = 2 ** 40;

/**
 * A stock order's rank (see `src/store/record-order.ts`): finished orders above every unfinished one; below that
 * the length of its trails (swap and refund: they only grow, so more signed versions is newer), then the state.
 */
export const stockOrderRecordOrder = {
  rank: (o: StockOrder): number => {
    const state = ORDER_STATE_RANK[o.state] ?? 0;
    return FINAL_ORDER_STATES.has(o.state) ? FINISHED_RANK + state : (o.swapTxs.length + o.refundTxs.length) * 16 + state;
  },
};
