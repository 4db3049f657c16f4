/**
 * The collections whose records never go backwards, by the names their owners open them under, with each record
 * module's rank (see `src/store/record-order.ts`): given to the store as it opens.
 */
import { ENGINE_RECORD_ORDERS } from '../engine/settlement-engine.ts';
import type { RecordOrders } from '../store/record-order.ts';
import { stockOrderRecordOrder } from '../stock/order-record.ts';

export const RECORD_ORDERS: RecordOrders = {
  // the engine's payments and batches (named where it opens them)
  ...ENGINE_RECORD_ORDERS,
  // src/stock/order-desk.ts
  'stock-orders': stockOrderRecordOrder,
};
