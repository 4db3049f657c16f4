import { assign, fromPromise, setup, type AnyEventObject } from 'xstate';
import type { OrderStep, StockOrder } from './order-record.ts';

export interface OrderInput {
  order: StockOrder;
  /** How long a refund that could not be sent waits before the next attempt. */
  refundRetryMs: number;
}

export interface OrderContext {
  order: StockOrder;
  refundRetryMs: number;
}

const notProvided = (step: string) =>
  fromPromise<OrderStep, { order: StockOrder }>(async () => {
    throw new Error(`order step '${step}' has no implementation`);
  });

type Ok = Extract<OrderStep, { ok: true }>;
const ok = ({ event }: { event: { output: OrderStep } }) => event.output.ok;
const take = assign<OrderContext, { type: string; output: OrderStep }, undefined, AnyEventObject, never>({
  order: ({ context, event }) => (event.output.ok ? (event.output as Ok).order : withFailure(event.output.order ?? context.order, event.output.reason, event.output.message)),
});
const failed = (reason: string) =>
  assign<OrderContext, { type: string; error: unknown }, undefined, AnyEventObject, never>({
    order: ({ context, event }) => withFailure(context.order, reason, String(event.error)),
  });

/**
 * The lifecycle of one stock buy. Each step's I/O is provided by the stock desk (`machine.provide`), so this
 * definition is pure and is what `npm run statecharts` exports.
 *
 * settling -> checkingPool -> quoting -> swapping -> confirmingSwap -> delivered
 * Any failure after settlement -> refunding -> confirmingRefund -> refunded; a refund that cannot be sent yet
 * waits in refundWaiting and is tried again, never dropped. A settlement that fails, and whose payment the chain
 * shows did not reach the desk -> rejected (nothing charged); one that cannot be told waits and settles again.
 * A restored order enters at the state its record names; a signed swap or refund is confirmed, never signed anew.
 */
export const orderMachine = setup({
  types: {
    input: {} as OrderInput,
    context: {} as OrderContext,
  },
  actors: {
    settle: notProvided('settle'),
    checkPool: notProvided('checkPool'),
    quote: notProvided('quote'),
    swap: notProvided('swap'),
    confirmSwap: notProvided('confirmSwap'),
    refund: notProvided('refund'),
    confirmRefund: notProvided('confirmRefund'),
  },
  guards: {
    was: ({ context }, params: { state: string }) => context.order.state === params.state,
    swapSigned: ({ context }) => context.order.swapTxs.length > 0 && (context.order.state === 'swapping' || context.order.state === 'confirmingSwap'),
    refundSigned: ({ context }) => context.order.refundTxs.length > 0 && ['refunding', 'refundWaiting', 'confirmingRefund'].includes(context.order.state),
  },
  delays: {
    refundRetry: ({ context }) => context.refundRetryMs,
    settleRetry: 1000,
  },
}).createMachine({
  id: 'order',
  context: ({ input }) => ({ order: input.order, refundRetryMs: input.refundRetryMs }),
  initial: 'routing',
  states: {
    routing: {
      always: [
        { guard: { type: 'was', params: { state: 'delivered' } }, target: 'delivered' },
        { guard: { type: 'was', params: { state: 'refunded' } }, target: 'refunded' },
        { guard: { type: 'was', params: { state: 'rejected' } }, target: 'rejected' },
        { guard: 'swapSigned', target: 'confirmingSwap' },
        { guard: 'refundSigned', target: 'confirmingRefund' },
        { guard: { type: 'was', params: { state: 'refunding' } }, target: 'refunding' },
        { guard: { type: 'was', params: { state: 'refundWaiting' } }, target: 'refunding' },
        { guard: { type: 'was', params: { state: 'checkingPool' } }, target: 'checkingPool' },
        { guard: { type: 'was', params: { state: 'quoting' } }, target: 'quoting' },
        { guard: { type: 'was', params: { state: 'swapping' } }, target: 'swapping' },
        { target: 'settling' },
      ],
    },
    settling: {
      invoke: {
        src: 'settle',
        input: ({ context }) => ({ order: context.order }),
        onDone: [{ guard: ok, target: 'checkingPool', actions: take }, { target: 'rejected', actions: take }],
        // The step answers every outcome itself (a failure only once the chain shows nothing moved); one that
        // throws told nothing, so the payment may have moved: settle again after a pause, never reject.
        onError: { target: 'settleWaiting' },
      },
    },
    settleWaiting: {
      after: { settleRetry: 'settling' },
    },
    checkingPool: {
      invoke: {
        src: 'checkPool',
        input: ({ context }) => ({ order: context.order }),
        onDone: [{ guard: ok, target: 'quoting', actions: take }, { target: 'refunding', actions: take }],
        onError: { target: 'refunding', actions: failed('pool_check_failed') },
      },
    },
    quoting: {
      invoke: {
        src: 'quote',
        input: ({ context }) => ({ order: context.order }),
        onDone: [{ guard: ok, target: 'swapping', actions: take }, { target: 'refunding', actions: take }],
        onError: { target: 'refunding', actions: failed('quote_failed') },
      },
    },
    swapping: {
      invoke: {
        src: 'swap',
        input: ({ context }) => ({ order: context.order }),
        onDone: [{ guard: ok, target: 'confirmingSwap', actions: take }, { target: 'refunding', actions: take }],
        onError: { target: 'refunding', actions: failed('swap_not_sent') },
      },
    },
    confirmingSwap: {
      invoke: {
        src: 'confirmSwap',
        input: ({ context }) => ({ order: context.order }),
        onDone: [{ guard: ok, target: 'delivered', actions: take }, { target: 'refunding', actions: take }],
        // The confirm step retries its own RPC failures; reaching here means the desk stopped. The record stays
        // in confirmingSwap and the next start resumes it.
      },
    },
    refunding: {
      invoke: {
        src: 'refund',
        input: ({ context }) => ({ order: context.order }),
        onDone: [{ guard: ok, target: 'confirmingRefund', actions: take }, { target: 'refundWaiting', actions: take }],
        onError: { target: 'refundWaiting' },
      },
    },
    refundWaiting: {
      after: { refundRetry: 'refunding' },
    },
    confirmingRefund: {
      invoke: {
        src: 'confirmRefund',
        input: ({ context }) => ({ order: context.order }),
        onDone: [{ guard: ok, target: 'refunded', actions: take }, { target: 'refundWaiting', actions: take }],
      },
    },
    delivered: { type: 'final' },
    refunded: { type: 'final' },
    /** The payment did not settle: nothing was charged, nothing to refund. */
    rejected: { type: 'final' },
  },
});

/** The first failure is why the order is refunded; later ones (a refund retried) do not overwrite it. */
function withFailure(order: StockOrder, reason: string, message: string): StockOrder {
  if (order.failure) return order;
  return { ...order, failure: { reason, message } };
}
