import { randomUUID } from 'node:crypto';
import type { Address } from 'viem';
import { fromPromise, type SnapshotFrom } from 'xstate';
import { DurableHost, topState } from '../actors/durable-host.ts';
import type { RelayerPool } from '../tx/relayer-pool.ts';
import type { ReorgGuard } from '../tx/reorg-guard.ts';
import { resend, sleep, type Courier } from '../tx/courier.ts';
import { nonceKeyOf } from '../schemes/payment-identity.ts';
import { schemeOfPayload } from '../schemes/registry.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { NonceClaims } from '../store/nonce-claims.ts';
import type { Store } from '../store/open-store.ts';
import type { StockMarket } from './market.ts';
import { orderMachine } from './order-machine.ts';
import { settleOrderPayment } from './order-payment.ts';
import { FINAL_ORDER_STATES, type OrderState, type OrderStep, type StockOrder } from './order-record.ts';
import { OrderSteps } from './order-steps.ts';
import type { SignedTx } from '../tx/trail.ts';
import type { BuyInput } from './terms.ts';

export interface StockDeskOptions {
  market: StockMarket;
  /** The desk's own relayer on the stock chain: it receives payments, swaps, refunds and sponsors gas. */
  pool: RelayerPool;
  /** The stock chain's reorg guard of the desk: every mined swap and refund is handed to it. */
  reorgs?: ReorgGuard;
  store: Store;
  /** Settles a buyer's payment (the settlement engine). */
  settle(request: VerifyRequest): Promise<SettleResponse>;
  pollMs: number;
  refundRetryMs: number;
  /** The router's deadline for a swap, from when it is signed. */
  swapDeadlineSeconds: number;
  log: Logger;
  now?: () => number;
  metrics?: Pick<Metrics, 'watchActor' | 'stockOrders' | 'stockOrderVolumeUsd' | 'stockRefunds'>;
  /**
   * In a cluster: tells the node running the desk that order `id` was placed here and waits in the inbox (see
   * {@link StockDesk.place}). A failure is only logged: the desk also sweeps its inbox on every lease renewal.
   */
  handOff?: (id: string) => Promise<void>;
}

/** How often a buy waiting on an order another node runs reads its record: from the first to the longest wait (ms). */
const REMOTE_WAIT_MS = { first: 100, longest: 1000 };

/** The order as its actor holds it, named by the state the actor is in. */
function orderOf(snapshot: SnapshotFrom<typeof orderMachine>): StockOrder {
  return { ...snapshot.context.order, state: topState(snapshot.value) as OrderState };
}

/** Feed keys sort by time: newest first is a reverse range scan, not a sort. */
const feedKey = (order: Pick<StockOrder, 'createdAt' | 'id'>) => `${String(order.createdAt).padStart(15, '0')}-${order.id}`;

/**
 * Runs stock orders: one XState actor per order, its record written to LMDB at every state; after a restart every
 * unfinished order resumes from its record and completes or refunds, exactly once: a signed swap or refund is
 * sent again as it was and confirmed, never signed anew.
 *
 * In a cluster every node has a desk, but only the one holding the desk lease runs orders (`start`, see
 * `desk-lease.ts`). A desk that is not running places an order by writing its record and an inbox entry, and hands
 * it off; the running desk picks it up from the inbox (told at once, and by a sweep on every lease renewal) and runs
 * it from its record, as it would resume it after a restart. A desk that starts (a restart, or a takeover of a dead
 * node's lease) resumes every unfinished order of the store, whichever node placed it or ran it last.
 */
export class StockDesk {
  readonly market: StockMarket;
  readonly #o: StockDeskOptions;
  readonly #orders: DurableCollection<StockOrder>;
  readonly #feed: DurableCollection<{ id: string }>;
  readonly #byPayer: DurableCollection<{ id: string }>;
  readonly #payments: NonceClaims;
  /** Orders placed at a node not running the desk, waiting for the running desk to pick them up. */
  readonly #inbox: DurableCollection<{ id: string }>;
  /** Set once `start` has resumed the store's unfinished orders: from then on this desk runs orders. */
  #running = false;
  /** Pick-ups, one at a time: an order is never spawned twice by two of them. */
  #pickUps: Promise<void> = Promise.resolve();
  /** Every order this process is running: one actor each, and the one writer of their records. */
  readonly #host: DurableHost<typeof orderMachine, StockOrder>;
  readonly #abort = new AbortController();
  readonly #now: () => number;
  /** The desk's relayer on the stock chain, as every send and confirmation goes through it. */
  readonly #courier: Courier;
  /** What each order does on the stock chain after its payment (see `order-steps.ts`). */
  readonly #steps: OrderSteps;

  constructor(opts: StockDeskOptions) {
    this.#o = opts;
    this.market = opts.market;
    this.#orders = opts.store.collection<StockOrder>('stock-orders');
    this.#feed = opts.store.collection<{ id: string }>('stock-order-feed');
    this.#byPayer = opts.store.collection<{ id: string }>('stock-order-payer');
    this.#payments = opts.store.claims('stock-order-payments');
    this.#inbox = opts.store.collection<{ id: string }>('stock-order-inbox');
    this.#now = opts.now ?? Date.now;
    const desk = this.address;
    this.#courier = { pool: opts.pool, client: this.market.client, pollMs: opts.pollMs, log: opts.log, ...(opts.reorgs ? { reorgs: opts.reorgs } : {}) };
    this.#steps = new OrderSteps({
      market: this.market,
      courier: this.#courier,
      desk,
      trail: (id, of, txs) => this.#host.record(id, { type: 'trail', of, txs }),
      swapDeadlineSeconds: opts.swapDeadlineSeconds,
      log: opts.log,
      now: this.#now,
    });
    const payment = { settle: opts.settle, market: this.market, desk, pollMs: opts.pollMs, log: opts.log, now: this.#now };
    const steps = this.#steps;
    const step = (fn: (o: StockOrder, signal: AbortSignal) => Promise<OrderStep>) =>
      fromPromise<OrderStep, { order: StockOrder }>(({ input, signal }) => fn(input.order, AbortSignal.any([signal, this.#abort.signal])));
    const machine = orderMachine.provide({
      actors: {
        settle: step((o, signal) => settleOrderPayment(payment, o, signal)),
        checkPool: step((o) => steps.checkPool(o)),
        quote: step((o) => steps.quote(o)),
        swap: step((o) => steps.swap(o)),
        confirmSwap: step((o, signal) => steps.confirmSwap(o, signal)),
        refund: step((o) => steps.refund(o)),
        confirmRefund: step((o, signal) => steps.confirmRefund(o, signal)),
      },
    });
    this.#host = new DurableHost({
      machine,
      log: opts.log,
      // Every state an order enters, and every signed version of its swap or refund before it is sent.
      durable: (snapshot, state) => {
        if (state === 'routing') return undefined;
        const order = orderOf(snapshot);
        return { key: `${state}|${order.swapTxs.length}|${order.refundTxs.length}`, value: order };
      },
      write: (order) => this.#write(order),
      started: (actor) => {
        this.#o.metrics?.watchActor('order', actor);
        const log = this.#o.log.child({ order: actor.getSnapshot().context.order.id });
        let last: string | undefined;
        actor.subscribe((snapshot) => {
          const current = orderOf(snapshot);
          if (current.state === last || current.state === ('routing' as OrderState)) return;
          const from = last;
          last = current.state;
          log.info('order state', { state: current.state, symbol: current.symbol, failure: current.failure?.reason });
          this.#count(current, from, snapshot.status === 'done');
        });
      },
    });
  }

  /** The address buyers pay: it holds stablecoin B only between a settlement and its swap or refund. */
  get address(): Address {
    return this.#o.pool.addresses[0] as Address;
  }

  /**
   * Re-sends what unfinished orders had signed (and `trails`, the desk's other signed transactions still in flight:
   * gas sponsorships), learns the desk's nonce, approves the router once, resumes every order, then runs orders.
   */
  async start(trails: readonly SignedTx[][] = []): Promise<void> {
    const unfinished: StockOrder[] = [];
    for await (const [, o] of this.#orders.entries()) if (!FINAL_ORDER_STATES.has(o.state) && !this.#host.snapshot(o.id)) unfinished.push(o);
    const signed = [...unfinished.map((o) => (o.refundTxs.length ? o.refundTxs : o.swapTxs)), ...trails];
    for (const txs of signed) await resend(this.#courier, txs);
    await this.#o.pool.init();
    for (const txs of signed) {
      const tx = txs.at(-1);
      if (tx) this.#o.pool.adopt(tx);
    }
    await this.#steps.approveRouter(this.#abort.signal);
    for (const o of unfinished) {
      this.#o.log.info('resuming stock order', { order: o.id, state: o.state });
      this.#spawn(o);
    }
    this.#running = true;
    // Placed elsewhere while this desk started: in the store's scan above, or in the inbox now (or at the next sweep).
    await this.sweepInbox().catch((error: unknown) => this.#o.log.warn('could not read the stock order inbox; the next sweep does', { error }));
  }

  /** Whether this desk runs orders (it started, and was not stopped). */
  get running(): boolean {
    return this.#running;
  }

  async stop(): Promise<void> {
    this.#running = false;
    this.#abort.abort();
    this.#host.stop();
  }

  /** Picks up every order waiting in the inbox (those whose hand-off was not heard). */
  async sweepInbox(): Promise<void> {
    if (!this.#running) return;
    const ids: string[] = [];
    for await (const [id] of this.#inbox.entries()) ids.push(id);
    for (const id of ids) await this.pickUp(id);
  }

  /**
   * Runs order `id`, placed at another node, from its record: once, however often it is handed off. Nothing while
   * this desk does not run orders (the inbox keeps it for the desk that does).
   */
  pickUp(id: string): Promise<void> {
    const next = this.#pickUps.then(async () => {
      if (!this.#running) return;
      if (!this.#host.snapshot(id)) {
        const order = await this.#orders.get(id);
        if (!order) this.#o.log.warn('an order handed off has no record; it is dropped from the inbox', { order: id });
        else if (!this.#running) return;
        // Checked again after the read, with no await before the spawn: never two actors for one order.
        else if (!FINAL_ORDER_STATES.has(order.state) && !this.#host.snapshot(id)) {
          this.#o.log.info('running a stock order placed at another node', { order: id, state: order.state });
          this.#spawn(order);
        }
      }
      await this.#inbox.remove(id);
    });
    this.#pickUps = next.catch((error: unknown) => this.#o.log.warn('could not pick up a stock order; the next sweep tries again', { order: id, error }));
    return this.#pickUps;
  }

  async get(id: string): Promise<StockOrder | undefined> {
    const running = this.#host.snapshot(id);
    return running ? orderOf(running) : this.#orders.get(id);
  }

  /** Newest first; one payer's orders, or everyone's. */
  async history(payer: Address | undefined, limit: number): Promise<StockOrder[]> {
    const index = payer ? this.#byPayer.entries(`${payer.toLowerCase()}|`, { reverse: true }) : this.#feed.entries('', { reverse: true });
    const out: StockOrder[] = [];
    for await (const [, { id }] of index) {
      const order = await this.get(id);
      if (order) out.push(order);
      if (out.length >= limit) break;
    }
    return out;
  }

  /**
   * The order a payment buys: a new one, or (the same payment sent again) the one it already bought. The payment
   * key is claimed atomically first, so one payment never starts two orders.
   */
  async place(payment: VerifyRequest, input: BuyInput, floor: { quotedShares: bigint; minShares: bigint; quoteBlock?: bigint }): Promise<StockOrder> {
    const paymentKey = nonceKeyOf(payment);
    const id = randomUUID();
    const claim = await this.#payments.claim(paymentKey, id);
    if (!claim.claimed) {
      const existing = await this.#orders.get(claim.holder);
      if (!existing) throw new Error('this payment is being placed by another request');
      // Not final and run by no one here: handed off again (a placing node that died before its hand-off).
      if (!FINAL_ORDER_STATES.has(existing.state) && !this.#host.snapshot(existing.id)) await this.#handOff(existing.id);
      return existing;
    }
    const payload = payment.paymentPayload.payload;
    const payer = schemeOfPayload(payload).payer(payload);
    const now = this.#now();
    const order: StockOrder = {
      id,
      state: 'settling',
      network: payment.paymentRequirements.network,
      symbol: input.stock.symbol,
      stock: input.stock.address,
      stockDecimals: input.stock.decimals,
      payer,
      recipient: input.recipient ?? payer,
      amount: input.amount.toString(),
      payment,
      paymentKey,
      quotedShares: floor.quotedShares.toString(),
      minShares: floor.minShares.toString(),
      ...(floor.quoteBlock !== undefined ? { sinceBlock: floor.quoteBlock.toString() } : {}),
      swapTxs: [],
      refundTxs: [],
      refundAttempts: 0,
      createdAt: now,
      updatedAt: now,
    };
    if (this.#running) {
      this.#spawn(order);
      await this.#host.firstWrite(id);
    } else {
      // The record first, then its inbox entry: the running desk finds the record of every entry it reads.
      await this.#orders.put(id, order);
      await this.#handOff(id);
    }
    await Promise.all([this.#feed.put(feedKey(order), { id }), this.#byPayer.put(`${payer.toLowerCase()}|${feedKey(order)}`, { id })]);
    return order;
  }

  /** The order once it is over, or as it stands after `ms` (run here, or read from its record as another node runs it). */
  async wait(id: string, ms: number): Promise<StockOrder | undefined> {
    const actor = this.#host.get(id);
    if (actor) return this.#host.answer(actor, ms, (snapshot, deadlinePassed) => (snapshot.status === 'done' || deadlinePassed ? orderOf(snapshot) : undefined));
    const deadline = performance.now() + ms;
    let pause = REMOTE_WAIT_MS.first;
    for (;;) {
      const order = await this.get(id);
      const left = deadline - performance.now();
      if (!order || FINAL_ORDER_STATES.has(order.state) || left <= 0 || this.#abort.signal.aborted) return order;
      // Picked up here meanwhile (this desk took over): its actor answers.
      const running = this.#host.get(id);
      if (running) return this.wait(id, left);
      await sleep(Math.min(pause, left), this.#abort.signal).catch(() => {});
      pause = Math.min(pause * 2, REMOTE_WAIT_MS.longest);
    }
  }

  /** Order `id` goes to the desk that runs orders: this one, or another node's through the inbox. */
  async #handOff(id: string): Promise<void> {
    if (this.#running) return this.pickUp(id);
    await this.#inbox.put(id, { id });
    await this.#o.handOff?.(id).catch((error: unknown) => this.#o.log.warn('could not tell the desk of a new order; its inbox sweep finds it', { order: id, error }));
  }

  #spawn(order: StockOrder): void {
    this.#host.spawn(order.id, { order, refundRetryMs: this.#o.refundRetryMs });
  }

  /** Outcomes and refunds, counted on the transitions this process makes (a resumed order is not counted twice). */
  #count(order: StockOrder, from: string | undefined, done: boolean): void {
    const m = this.#o.metrics;
    if (!m) return;
    if (order.state === 'confirmingRefund' && from !== undefined) m.stockRefunds.labels(order.failure?.reason ?? 'unknown').inc();
    if (!done) return;
    m.stockOrders.labels(order.symbol, order.state).inc();
    if (order.state === 'delivered') m.stockOrderVolumeUsd.labels(order.symbol).inc(Number(order.amount) / 1e6);
  }

  async #write(order: StockOrder): Promise<void> {
    await this.#orders.put(order.id, { ...order, updatedAt: this.#now() });
  }
}
