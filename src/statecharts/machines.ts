import { claimMachine } from '../channels/claim-machine.ts';
import { refundMachine } from '../channels/refund-machine.ts';
import { batchMachine } from '../engine/batch-machine.ts';
import { paymentMachine } from '../engine/payment-machine.ts';
import { orderMachine } from '../stock/order-machine.ts';
import type { ChartedMachine } from './export.ts';

/** Every machine `npm run statecharts` exports to `statecharts/`: adding one is one line. */
export const CHARTED_MACHINES: ChartedMachine[] = [
  { name: 'payment', source: 'src/engine/payment-machine.ts', machine: paymentMachine },
  { name: 'batch', source: 'src/engine/batch-machine.ts', machine: batchMachine },
  { name: 'order', source: 'src/stock/order-machine.ts', machine: orderMachine },
  { name: 'claim', source: 'src/channels/claim-machine.ts', machine: claimMachine },
  { name: 'refund', source: 'src/channels/refund-machine.ts', machine: refundMachine },
];
