import { randomUUID } from 'node:crypto';
import { encodeFunctionData, erc20Abi, maxUint256, type Address } from 'viem';
import { fromPromise, type SnapshotFrom } from 'xstate';
import { DurableHost, topState } from '../actors/durable-host.ts';
import type { RelayerPool } from '../tx/relayer-pool.ts';
import type { ReorgGuard } from '../tx/reorg-guard.ts';
import { awaitMined, resend, sendDurably, sleep, type Courier } from '../tx/courier.ts';
import { nonceKeyOf } from '../schemes/payment-identity.ts';
import { schemeOfPayload } from '../schemes/registry.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import type { DurableCollection } from '../store/durable-collection.ts';
import type { NonceClaims } from '../store/nonce-claims.ts';
import type { Store } from '../store/open-store.ts';
import { StockMarket, type PaymentEvidence } from './market.ts';
import { orderMachine } from './order-machine.ts';
import { FINAL_ORDER_STATES, orderFailed, type OrderState, type OrderStep, type StockOrder } from './order-record.ts';
import type { SignedTx } from '../tx/trail.ts';
import { ok } from '../protocol/result.ts';
import { SETTLEMENT_SHED } from '../ports/settlement.ts';
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

/** When the order's payment can no longer settle: its Permit2 deadline, in ms (0 for another kind of payment). */
function permitDeadlineMs(order: StockOrder): number {
  const payload = order.payment.paymentPayload.payload;
  return 'permit2Authorization' in payload ? Number(payload.permit2Authorization.deadline) * 1000 : 0;
}

/** The wait a shed answer asks for (its Retry-After), from 1 to 30 s. */
function retryAfterMs(r: SettleResponse): number {
  const seconds = r.extra?.retryAfterSeconds;
  return Math.min(30, Math.max(1, typeof seconds === 'number' && Number.isFinite(seconds) ? seconds : 1)) * 1000;
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

  constructor(opts: StockDeskOptions) {
    this.#o = opts;
    this.market = opts.market;
    this.#orders = opts.store.collection<StockOrder>('stock-orders');
    this.#feed = opts.store.collection<{ id: string }>('stock-order-feed');
    this.#byPayer = opts.store.collection<{ id: string }>('stock-order-payer');
    this.#payments = opts.store.claims('stock-order-payments');
    this.#inbox = opts.store.collection<{ id: string }>('stock-order-inbox');
    this.#now = opts.now ?? Date.now;
    const step = (fn: (o: StockOrder, signal: AbortSignal) => Promise<OrderStep>) =>
      fromPromise<OrderStep, { order: StockOrder }>(({ input, signal }) => fn(input.order, AbortSignal.any([signal, this.#abort.signal])));
    const machine = orderMachine.provide({
      actors: {
        settle: step((o, signal) => this.#settleStep(o, signal)),
        checkPool: step((o) => this.#checkPoolStep(o)),
        quote: step((o) => this.#quoteStep(o)),
        swap: step((o) => this.#swapStep(o)),
        confirmSwap: step((o, signal) => this.#confirmSwapStep(o, signal)),
        refund: step((o) => this.#refundStep(o)),
        confirmRefund: step((o, signal) => this.#confirmRefundStep(o, signal)),
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

  get #courier(): Courier {
    return { pool: this.#o.pool, client: this.market.client, pollMs: this.#o.pollMs, log: this.#o.log, ...(this.#o.reorgs ? { reorgs: this.#o.reorgs } : {}) };
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
    await this.#approveRouter();
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

  /**
   * Settles the payment; a pending settlement is waited for, never paid again. A settlement that reports failure
   * (or throws) is not taken at its word: the chain is asked whether the payment reached the desk anyway (copied
   * from the mempool and sent by someone else first, or our own send that landed despite an error). If it did, the
   * order goes on as settled; it is rejected ("nothing charged") only when the chain shows the desk holds nothing
   * of it. While the chain cannot be asked, the order waits in `settling`.
   */
  async #settleStep(order: StockOrder, signal: AbortSignal): Promise<OrderStep> {
    let thrown = 0;
    for (;;) {
      if (signal.aborted) throw new Error('stopped while settling');
      let r: SettleResponse | undefined;
      try {
        r = await this.#o.settle(order.payment);
      } catch (err) {
        this.#o.log.warn('settlement threw; the chain is asked whether the payment moved', { order: order.id, error: err });
      }
      if (r?.success) return ok({ ...order, payer: (r.payer as Address | undefined) ?? order.payer, settlement: r });
      if (r?.status === 'pending') {
        await sleep(this.#o.pollMs, signal);
        continue;
      }
      // Turned away for backpressure (the settlement queue is behind) before anything was verified or charged: no
      // refusal of this payment. The order waits in `settling` for the Retry-After the answer names and asks again,
      // while the payment's permit is still valid; past it, the settlement's own answer decides.
      if (r?.errorReason === SETTLEMENT_SHED && this.#now() < permitDeadlineMs(order)) {
        this.#o.log.info('settlement shed; the order asks again after its Retry-After', { order: order.id, reason: r.extra?.reason });
        await sleep(retryAfterMs(r), signal);
        continue;
      }
      let evidence: PaymentEvidence;
      try {
        evidence = await this.#paymentEvidence(order);
      } catch (err) {
        this.#o.log.warn('cannot tell whether a payment moved; asking again', { order: order.id, error: err });
        await sleep(Math.max(this.#o.pollMs, 1000), signal);
        continue;
      }
      if (evidence.moved) {
        this.#o.log.warn('the settlement reported failure, but the payment reached the desk: the order goes on', {
          order: order.id,
          reported: r?.errorReason ?? 'an error',
          transaction: evidence.transaction,
        });
        const settlement: SettleResponse = { success: true, transaction: evidence.transaction, network: order.network as SettleResponse['network'], payer: order.payer };
        return ok({ ...order, settlement });
      }
      // A settlement that threw is asked again a few times while the payment has not moved: it may yet settle.
      if (r === undefined && ++thrown < 5) {
        await sleep(Math.max(this.#o.pollMs, 500), signal);
        continue;
      }
      const reason = r?.errorReason ?? 'settlement_error';
      const message = `${r?.errorMessage ?? 'the settlement failed'}${evidence.nonceUsed ? ' (the permit nonce is used, but no transfer of this payment to the desk is on chain)' : ''}`;
      return orderFailed(reason, message, r ? { ...order, settlement: r } : order);
    }
  }

  /** What the chain says of this order's payment: a Permit2 witness transfer to the desk. */
  async #paymentEvidence(order: StockOrder): Promise<PaymentEvidence> {
    const payload = order.payment.paymentPayload.payload;
    if (!('permit2Authorization' in payload)) throw new Error('a stock order is paid with Permit2');
    const p = payload.permit2Authorization;
    return this.market.permit2Evidence(
      { from: p.from as Address, to: this.address, amount: BigInt(order.amount), nonce: BigInt(p.nonce) },
      order.sinceBlock === undefined ? undefined : BigInt(order.sinceBlock),
    );
  }

  async #checkPoolStep(order: StockOrder): Promise<OrderStep> {
    const stock = this.#stock(order);
    const check = await this.market.verifyPool(stock);
    return check.ok ? ok(order) : orderFailed(check.error.code, check.error.message);
  }

  /** Re-quotes on chain right before the swap: below the floor, the order is refunded without swapping. */
  async #quoteStep(order: StockOrder): Promise<OrderStep> {
    const shares = await this.market.quote(this.#stock(order), BigInt(order.amount));
    const next = { ...order, requotedShares: shares.toString() };
    if (shares < BigInt(order.minShares)) {
      return orderFailed('below_slippage_floor', `the pool now gives ${shares} shares, below the floor of ${order.minShares}`, next);
    }
    return ok(next);
  }

  /** Signs the swap (floor as amountOutMinimum, the recipient as receiver), stores it, then sends it. */
  async #swapStep(order: StockOrder): Promise<OrderStep> {
    const deadline = BigInt(Math.floor(this.#now() / 1000) + this.#o.swapDeadlineSeconds);
    const call = this.market.swapCall(this.#stock(order), BigInt(order.amount), BigInt(order.minShares), order.recipient, deadline);
    let gas: bigint;
    try {
      gas = await this.market.client.estimateGas({ account: this.address, ...call });
    } catch (err) {
      return orderFailed('swap_would_revert', `the swap would revert: ${String((err as Error).message).split('\n')[0]}`);
    }
    const current = order;
    const sent = await sendDurably(this.#courier, { ...call, gas: (gas * 13n) / 10n }, order.swapTxs, (txs) => this.#host.record(order.id, { type: 'trail', of: 'swapTxs', txs }));
    if (sent.ok) return ok({ ...current, swapTxs: sent.value });
    // Refused by the node: unless it is there after all (a timed-out send that arrived), nothing will mine.
    const last = sent.error.txs.at(-1);
    if (
      last &&
      (await this.market.client.getTransaction({ hash: last.hash }).then(
        () => true,
        () => false,
      ))
    )
      return ok({ ...current, swapTxs: sent.error.txs });
    return orderFailed('swap_not_sent', sent.error.message, { ...current, swapTxs: [] });
  }

  async #confirmSwapStep(order: StockOrder, signal: AbortSignal): Promise<OrderStep> {
    const mined = await awaitMined(this.#courier, order.swapTxs, (txs) => this.#host.record(order.id, { type: 'trail', of: 'swapTxs', txs }), signal);
    const next = { ...order, swapTxs: mined.txs, swapTx: mined.receipt.transactionHash };
    if (mined.receipt.status !== 'success') return orderFailed('swap_reverted', `swap ${mined.receipt.transactionHash} reverted (the price moved below the floor, or the deadline passed)`, next);
    return ok({ ...next, delivered: StockMarket.delivered(mined.receipt, order.stock, order.recipient).toString() });
  }

  /** Stablecoin B back to the payer. */
  async #refundStep(order: StockOrder): Promise<OrderStep> {
    // Failed attempts leave no trail behind (refused or reverted); one left here was signed: confirm it, sign nothing.
    if (order.refundTxs.length) return ok(order);
    const base = { ...order, refundAttempts: order.refundAttempts + 1 };
    const call = this.market.refundCall(order.payer, BigInt(order.amount));
    const current = base;
    try {
      const sent = await sendDurably(this.#courier, { ...call, gas: 120_000n }, [], (txs) => this.#host.record(order.id, { type: 'trail', of: 'refundTxs', txs }));
      if (sent.ok) return ok({ ...current, refundTxs: sent.value });
      this.#o.log.error('a refund could not be sent; it stays queued', { order: order.id, attempt: current.refundAttempts, why: sent.error.message });
      return orderFailed(order.failure?.reason ?? 'refund_not_sent', sent.error.message, { ...current, refundTxs: [] });
    } catch (err) {
      this.#o.log.error('a refund could not be sent; it stays queued', { order: order.id, attempt: current.refundAttempts, error: err });
      return orderFailed(order.failure?.reason ?? 'refund_not_sent', String(err), { ...current, refundTxs: [] });
    }
  }

  async #confirmRefundStep(order: StockOrder, signal: AbortSignal): Promise<OrderStep> {
    const current = order;
    const mined = await awaitMined(this.#courier, order.refundTxs, (txs) => this.#host.record(order.id, { type: 'trail', of: 'refundTxs', txs }), signal);
    if (mined.receipt.status !== 'success') {
      this.#o.log.error('a refund reverted; it is tried again', { order: order.id, tx: mined.receipt.transactionHash });
      return orderFailed('refund_reverted', `refund ${mined.receipt.transactionHash} reverted`, { ...current, refundTxs: [] });
    }
    return ok({ ...current, refundTxs: mined.txs, refundTx: mined.receipt.transactionHash });
  }

  #stock(order: StockOrder) {
    const stock = this.market.stocks.find((s) => s.address.toLowerCase() === order.stock.toLowerCase());
    if (!stock) throw new Error(`stock ${order.symbol} is no longer listed`);
    return stock;
  }

  /** The router pulls stablecoin B from the desk: one approval, once. */
  async #approveRouter(): Promise<void> {
    const router = this.market.uniswap.router;
    if ((await this.market.allowance(this.market.stable, this.address, router)) >= maxUint256 / 2n) return;
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [router, maxUint256] });
    const sent = await sendDurably(this.#courier, { to: this.market.stable, data, gas: 100_000n }, [], async () => {});
    if (!sent.ok) throw new Error(`the stock desk could not approve the router: ${sent.error.message}`);
    const mined = await awaitMined(this.#courier, sent.value, async () => {}, this.#abort.signal);
    if (mined.receipt.status !== 'success') throw new Error('the stock desk router approval reverted');
    this.#o.log.info('stock desk approved the router', { desk: this.address, router, tx: mined.receipt.transactionHash });
  }
}
