import { assign, fromPromise, setup, type DoneActorEvent, type ErrorActorEvent } from 'xstate';
import { extendsTrail, type SignedTx } from '../tx/trail.ts';
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

/** A step signed a version of the swap or the refund: the machine takes the grown trail before it is sent. */
export type OrderEvent = { type: 'trail'; of: 'swapTxs' | 'refundTxs'; txs: SignedTx[] };

const notProvided = (step: string) =>
  fromPromise<OrderStep, { order: StockOrder }>(async () => {
    throw new Error(`order step '${step}' has no implementation`);
  });

const outputOf = (event: unknown) => (event as DoneActorEvent<OrderStep>).output;

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
    events: {} as OrderEvent,
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
    /** The step's output says it succeeded (`ok: true`). */
    stepOk: ({ event }) => outputOf(event).ok,
    /** A trail handed in extends the recorded one. */
    grows: ({ context, event }) => event.type === 'trail' && extendsTrail(context.order[event.of], event.txs),
  },
  actions: {
    /** The order as the step left it; a failure keeps the first reason. */
    take: assign({
      order: ({ context, event }) => {
        const out = outputOf(event);
        return out.ok ? out.value : withFailure(out.error.order ?? context.order, out.error.code, out.error.message);
      },
    }),
    /** A step threw: the order fails for `reason`. */
    failed: assign({ order: ({ context, event }, params: { reason: string }) => withFailure(context.order, params.reason, String((event as unknown as ErrorActorEvent).error)) }),
    growTrail: assign({ order: ({ context, event }) => (event.type === 'trail' ? { ...context.order, [event.of]: event.txs } : context.order) }),
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
        onDone: [
          { guard: 'stepOk', target: 'checkingPool', actions: 'take' },
          { target: 'rejected', actions: 'take' },
        ],
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
        onDone: [
          { guard: 'stepOk', target: 'quoting', actions: 'take' },
          { target: 'refunding', actions: 'take' },
        ],
        onError: { target: 'refunding', actions: { type: 'failed', params: { reason: 'pool_check_failed' } } },
      },
    },
    quoting: {
      invoke: {
        src: 'quote',
        input: ({ context }) => ({ order: context.order }),
        onDone: [
          { guard: 'stepOk', target: 'swapping', actions: 'take' },
          { target: 'refunding', actions: 'take' },
        ],
        onError: { target: 'refunding', actions: { type: 'failed', params: { reason: 'quote_failed' } } },
      },
    },
    swapping: {
      invoke: {
        src: 'swap',
        input: ({ context }) => ({ order: context.order }),
        onDone: [
          { guard: 'stepOk', target: 'confirmingSwap', actions: 'take' },
          { target: 'refunding', actions: 'take' },
        ],
        onError: { target: 'refunding', actions: { type: 'failed', params: { reason: 'swap_not_sent' } } },
      },
      on: { trail: { guard: 'grows', actions: 'growTrail' } },
    },
    confirmingSwap: {
      invoke: {
        src: 'confirmSwap',
        input: ({ context }) => ({ order: context.order }),
        onDone: [
          { guard: 'stepOk', target: 'delivered', actions: 'take' },
          { target: 'refunding', actions: 'take' },
        ],
        // The confirm step retries its own RPC failures; reaching here means the desk stopped. The record stays
        // in confirmingSwap and the next start resumes it.
      },
      on: { trail: { guard: 'grows', actions: 'growTrail' } },
    },
    refunding: {
      invoke: {
        src: 'refund',
        input: ({ context }) => ({ order: context.order }),
        onDone: [
          { guard: 'stepOk', target: 'confirmingRefund', actions: 'take' },
          { target: 'refundWaiting', actions: 'take' },
        ],
        onError: { target: 'refundWaiting' },
      },
      on: { trail: { guard: 'grows', actions: 'growTrail' } },
    },
    refundWaiting: {
      after: { refundRetry: 'refunding' },
    },
    confirmingRefund: {
      invoke: {
        src: 'confirmRefund',
        input: ({ context }) => ({ order: context.order }),
        onDone: [
          { guard: 'stepOk', target: 'refunded', actions: 'take' },
          { target: 'refundWaiting', actions: 'take' },
        ],
      },
      on: { trail: { guard: 'grows', actions: 'growTrail' } },
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
