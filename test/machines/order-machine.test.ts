// The stock order machine driven through its transitions with fake steps: no chain, no store, milliseconds.
import t from 'tap';
import { fromPromise, toPromise } from 'xstate';
import { DurableHost } from '../../src/actors/durable-host.ts';
import { createLogger } from '../../src/log/logger.ts';
import type { Address, Hex } from 'viem';
import { orderMachine } from '../../src/stock/order-machine.ts';
import { orderFailed, type OrderStep, type StockOrder } from '../../src/stock/order-record.ts';
import { ok } from '../../src/protocol/result.ts';
import type { SignedTx } from '../../src/tx/trail.ts';
import type { VerifyRequest } from '../../src/protocol/x402/types.ts';
import { trace } from '../helpers/actor-trace.ts';

const network = 'eip155:31337';
const payer = '0x1111111111111111111111111111111111111111' as Address;
const payTx = `0x${'01'.repeat(32)}` as Hex;
const swapTx = `0x${'02'.repeat(32)}` as Hex;
const refundTx = `0x${'03'.repeat(32)}` as Hex;
const signed = (hash: Hex): SignedTx => ({ hash }) as SignedTx;

function newOrder(over: Partial<StockOrder> = {}): StockOrder {
  return {
    id: 'o1',
    state: 'settling',
    network,
    symbol: 'ACME',
    stock: '0x4444444444444444444444444444444444444444',
    stockDecimals: 18,
    payer,
    recipient: payer,
    amount: '5000000',
    payment: {} as VerifyRequest,
    paymentKey: 'permit2|k',
    quotedShares: '100',
    minShares: '95',
    swapTxs: [],
    refundTxs: [],
    refundAttempts: 0,
    createdAt: 0,
    updatedAt: 0,
    ...over,
  };
}

type Step = (order: StockOrder) => Promise<OrderStep> | OrderStep;
type Steps = Record<'settle' | 'checkPool' | 'quote' | 'swap' | 'confirmSwap' | 'refund' | 'confirmRefund', Step>;

/** Steps that deliver an order; each call is counted. */
function happySteps(): Steps {
  return {
    settle: (o) => ok({ ...o, settlement: { success: true, transaction: payTx, network, payer } }),
    checkPool: (o) => ok(o),
    quote: (o) => ok({ ...o, requotedShares: '99' }),
    swap: (o) => ok({ ...o, swapTxs: [...o.swapTxs, signed(swapTx)] }),
    confirmSwap: (o) => ok({ ...o, swapTx, delivered: '99' }),
    refund: (o) => ok({ ...o, refundAttempts: o.refundAttempts + 1, refundTxs: [signed(refundTx)] }),
    confirmRefund: (o) => ok({ ...o, refundTx }),
  };
}

function run(steps: Partial<Steps>, order = newOrder()) {
  const all = { ...happySteps(), ...steps };
  const calls: string[] = [];
  const step = (name: keyof Steps) =>
    fromPromise<OrderStep, { order: StockOrder }>(async ({ input }) => {
      calls.push(name);
      return all[name](input.order);
    });
  const machine = orderMachine.provide({
    actors: {
      settle: step('settle'),
      checkPool: step('checkPool'),
      quote: step('quote'),
      swap: step('swap'),
      confirmSwap: step('confirmSwap'),
      refund: step('refund'),
      confirmRefund: step('confirmRefund'),
    },
    delays: { settleRetry: 1 },
  });
  return trace(machine, { order, refundRetryMs: 1 }).then((r) => ({ ...r, calls, order: r.snapshot.context.order }));
}
const count = (calls: string[], name: string) => calls.filter((c) => c === name).length;

t.test('an order is paid, swapped once and delivered', async (t) => {
  const { states, calls, order } = await run({});
  t.same(states, ['settling', 'checkingPool', 'quoting', 'swapping', 'confirmingSwap', 'delivered']);
  t.equal(count(calls, 'swap'), 1, 'one swap');
  t.equal(count(calls, 'refund'), 0, 'no refund');
  t.equal(order.settlement?.transaction, payTx);
  t.equal(order.delivered, '99', 'the shares delivered are on the order');
  t.equal(order.requotedShares, '99');
  t.equal(order.failure, undefined);
});

t.test('a payment that did not settle is rejected: nothing charged, nothing refunded', async (t) => {
  const { states, calls, order } = await run({ settle: (o) => orderFailed('permit2_invalid_signature', 'bad', o) });
  t.same(states, ['settling', 'rejected']);
  t.same(calls, ['settle']);
  t.equal(order.failure?.reason, 'permit2_invalid_signature');
});

t.test('a settle step that throws told nothing: it waits and settles again, never rejects', async (t) => {
  let tries = 0;
  const { states, calls } = await run({ settle: (o) => (++tries < 3 ? Promise.reject(new Error('rpc down')) : happySteps().settle(o)) });
  t.same(states, ['settling', 'settleWaiting', 'settling', 'settleWaiting', 'settling', 'checkingPool', 'quoting', 'swapping', 'confirmingSwap', 'delivered']);
  t.equal(count(calls, 'settle'), 3);
});

t.test('a quote below the floor refunds the payment, with its reason', async (t) => {
  const { states, calls, order } = await run({ quote: (o) => orderFailed('below_slippage_floor', 'the pool now gives 90 shares', { ...o, requotedShares: '90' }) });
  t.same(states, ['settling', 'checkingPool', 'quoting', 'refunding', 'confirmingRefund', 'refunded']);
  t.equal(count(calls, 'swap'), 0, 'never swapped');
  t.equal(count(calls, 'refund'), 1, 'refunded once');
  t.equal(order.failure?.reason, 'below_slippage_floor', 'the refund says why');
  t.equal(order.requotedShares, '90', 'what the failed step learnt is kept');
  t.equal(order.refundTx, refundTx);
});

t.test('pool check and quote steps that throw refund with their own reasons', async (t) => {
  const pool = await run({ checkPool: () => Promise.reject(new Error('rpc')) });
  t.equal(pool.states.at(-1), 'refunded');
  t.equal(pool.order.failure?.reason, 'pool_check_failed');
  const quote = await run({ quote: () => Promise.reject(new Error('rpc')) });
  t.equal(quote.order.failure?.reason, 'quote_failed');
  const swap = await run({ swap: () => Promise.reject(new Error('rpc')) });
  t.equal(swap.order.failure?.reason, 'swap_not_sent');
});

t.test('a reverted swap is refunded', async (t) => {
  const { states, order } = await run({ confirmSwap: (o) => orderFailed('swap_reverted', 'reverted', { ...o, swapTx }) });
  t.same(states, ['settling', 'checkingPool', 'quoting', 'swapping', 'confirmingSwap', 'refunding', 'confirmingRefund', 'refunded']);
  t.equal(order.failure?.reason, 'swap_reverted');
  t.equal(order.swapTx, swapTx, 'the reverted swap stays on the record');
});

t.test('a refund that cannot be sent waits and is tried again, never dropped; the first reason stands', async (t) => {
  let tries = 0;
  const { states, calls, order } = await run({
    quote: (o) => orderFailed('below_slippage_floor', 'low', o),
    refund: (o) => (++tries < 3 ? orderFailed('refund_not_sent', 'no gas', { ...o, refundAttempts: o.refundAttempts + 1 }) : happySteps().refund(o)),
  });
  t.same(states, ['settling', 'checkingPool', 'quoting', 'refunding', 'refundWaiting', 'refunding', 'refundWaiting', 'refunding', 'confirmingRefund', 'refunded']);
  t.equal(count(calls, 'refund'), 3);
  t.equal(order.refundAttempts, 3, 'every attempt counted');
  t.equal(order.failure?.reason, 'below_slippage_floor', 'the refund keeps the first reason');
});

t.test('a reverted refund is sent again', async (t) => {
  let tries = 0;
  const { states, calls } = await run({
    quote: (o) => orderFailed('below_slippage_floor', 'low', o),
    confirmRefund: (o) => (++tries < 2 ? orderFailed('refund_reverted', 'reverted', { ...o, refundTxs: [] }) : happySteps().confirmRefund(o)),
  });
  t.same(states, ['settling', 'checkingPool', 'quoting', 'refunding', 'confirmingRefund', 'refundWaiting', 'refunding', 'confirmingRefund', 'refunded']);
  t.equal(count(calls, 'refund'), 2);
});

t.test('a restored order resumes where its record stood; a signed swap or refund is confirmed, never signed anew', async (t) => {
  const swapping = await run({}, newOrder({ state: 'swapping', swapTxs: [signed(swapTx)] }));
  t.same(swapping.states, ['confirmingSwap', 'delivered']);
  t.same(swapping.calls, ['confirmSwap'], 'the swap is not sent again');

  const refunding = await run({}, newOrder({ state: 'refundWaiting', refundTxs: [signed(refundTx)], failure: { reason: 'swap_reverted', message: '' } }));
  t.same(refunding.states, ['confirmingRefund', 'refunded']);
  t.same(refunding.calls, ['confirmRefund']);

  const unsigned = await run({}, newOrder({ state: 'refundWaiting', failure: { reason: 'swap_reverted', message: '' } }));
  t.same(unsigned.states, ['refunding', 'confirmingRefund', 'refunded'], 'an unsent refund is sent');

  const quoting = await run({}, newOrder({ state: 'quoting' }));
  t.same(quoting.states, ['quoting', 'swapping', 'confirmingSwap', 'delivered'], 'a paid order is not settled again');
  t.notOk(quoting.calls.includes('settle'));

  for (const state of ['delivered', 'refunded', 'rejected'] as const) {
    const over = await run({}, newOrder({ state }));
    t.same(over.states, [state], `a ${state} order stays ${state}`);
    t.same(over.calls, []);
  }
});

t.test('hosted durably: a signed swap is written before it is sent, one write per state and per grown trail', async (t) => {
  const log: string[] = [];
  const steps = happySteps();
  const machine = orderMachine.provide({
    actors: {
      settle: fromPromise<OrderStep, { order: StockOrder }>(async ({ input }) => steps.settle(input.order)),
      checkPool: fromPromise<OrderStep, { order: StockOrder }>(async ({ input }) => steps.checkPool(input.order)),
      quote: fromPromise<OrderStep, { order: StockOrder }>(async ({ input }) => steps.quote(input.order)),
      swap: fromPromise<OrderStep, { order: StockOrder }>(async ({ input }) => {
        await host.record(input.order.id, { type: 'trail', of: 'swapTxs', txs: [signed(swapTx)] });
        log.push('send swap');
        return ok({ ...input.order, swapTxs: [signed(swapTx)] });
      }),
      confirmSwap: fromPromise<OrderStep, { order: StockOrder }>(async ({ input }) => {
        const stale = await host.record(input.order.id, { type: 'trail', of: 'refundTxs', txs: [] }).then(
          () => 'taken',
          (err: unknown) => String(err),
        );
        t.match(stale, /did not take/, 'a trail that does not grow is refused');
        return steps.confirmSwap(input.order);
      }),
    },
  });
  const host = new DurableHost({
    machine,
    log: createLogger('test', { write: () => {} }),
    durable: (snapshot, state) =>
      state === 'routing'
        ? undefined
        : { key: `${state}|${snapshot.context.order.swapTxs.length}|${snapshot.context.order.refundTxs.length}`, value: { ...snapshot.context.order, state } as StockOrder },
    write: async (order) => {
      await new Promise((r) => setTimeout(r, 1));
      log.push(`write ${order.state} ${order.swapTxs.length}`);
    },
  });
  const actor = host.spawn('o1', { order: newOrder(), refundRetryMs: 1 });
  await toPromise(actor);
  await host.written('o1');
  t.same(log, ['write settling 0', 'write checkingPool 0', 'write quoting 0', 'write swapping 0', 'write swapping 1', 'send swap', 'write confirmingSwap 1', 'write delivered 1']);
  t.equal(host.snapshot('o1'), undefined, 'once its last write is on disk the host lets the order go');
});
