/**
 * The collections whose records never go backwards, by the names their owners open them under, with each record
 * module's rank (see `src/store/record-order.ts`): given to the store as it opens.
 */
import { batchRecordOrder, paymentRecordOrder } from '../engine/payment-record.ts';
import type { RecordOrders } from '../store/record-order.ts';
import { stockOrderRecordOrder } from '../stock/order-record.ts';

export const RECORD_ORDERS: RecordOrders = {
  // src/engine/settlement-engine.ts
  payments: paymentRecordOrder,
  'payment-batches': batchRecordOrder,
  // src/stock/order-desk.ts
  'stock-orders': stockOrderRecordOrder,
};
