import { encodeFunctionData, erc20Abi, maxUint256, type Address } from 'viem';
import type { Logger } from '../log/logger.ts';
import { ok } from '../protocol/result.ts';
import { awaitMined, sendDurably, type Courier } from '../tx/courier.ts';
import type { SignedTx } from '../tx/trail.ts';
import { StockMarket } from './market.ts';
import { orderFailed, type OrderStep, type StockOrder } from './order-record.ts';

/** Which signed trail of an order a step grows: its swap's or its refund's. */
export type OrderTrail = 'swapTxs' | 'refundTxs';

/** What the desk's steps on the stock chain need: the market, the desk's courier and address, and where trails go. */
export interface OrderStepsDeps {
  market: StockMarket;
  /** The desk's relayer on the stock chain, as the courier sends from it. */
  courier: Courier;
  /** The desk's address: the payee of every order, the sender of its swap and refund. */
  desk: Address;
  /** Has the order's actor take a grown trail (its host writes it durably) before the transaction is sent. */
  trail(id: string, of: OrderTrail, txs: SignedTx[]): Promise<void>;
  /** The router's deadline for a swap, from when it is signed. */
  swapDeadlineSeconds: number;
  log: Logger;
  now: () => number;
}

/**
 * What an order does on the stock chain once its payment settled: the pool checked, a fresh quote against the floor,
 * the swap signed, stored, sent and confirmed; on a failure after settlement, stablecoin B back to the payer. Every
 * signed transaction is recorded before it is sent, and only ever re-sent as it was (see `tx/courier.ts`).
 */
export class OrderSteps {
  readonly #d: OrderStepsDeps;

  constructor(deps: OrderStepsDeps) {
    this.#d = deps;
  }

  async checkPool(order: StockOrder): Promise<OrderStep> {
    const check = await this.#d.market.verifyPool(this.#stock(order));
    return check.ok ? ok(order) : orderFailed(check.error.code, check.error.message);
  }

  /** Re-quotes on chain right before the swap: below the floor, the order is refunded without swapping. */
  async quote(order: StockOrder): Promise<OrderStep> {
    const shares = await this.#d.market.quote(this.#stock(order), BigInt(order.amount));
    const next = { ...order, requotedShares: shares.toString() };
    if (shares < BigInt(order.minShares)) {
      return orderFailed('below_slippage_floor', `the pool now gives ${shares} shares, below the floor of ${order.minShares}`, next);
    }
    return ok(next);
  }

  /** Signs the swap (floor as amountOutMinimum, the recipient as receiver), stores it, then sends it. */
  async swap(order: StockOrder): Promise<OrderStep> {
    const { market } = this.#d;
    const deadline = BigInt(Math.floor(this.#d.now() / 1000) + this.#d.swapDeadlineSeconds);
    const call = market.swapCall(this.#stock(order), BigInt(order.amount), BigInt(order.minShares), order.recipient, deadline);
    let gas: bigint;
    try {
      gas = await market.client.estimateGas({ account: this.#d.desk, ...call });
    } catch (err) {
      return orderFailed('swap_would_revert', `the swap would revert: ${String((err as Error).message).split('\n')[0]}`);
    }
    const sent = await sendDurably(this.#d.courier, { ...call, gas: (gas * 13n) / 10n }, order.swapTxs, (txs) => this.#d.trail(order.id, 'swapTxs', txs));
    if (sent.ok) return ok({ ...order, swapTxs: sent.value });
    // Refused by the node: unless it is there after all (a timed-out send that arrived), nothing will mine.
    const last = sent.error.txs.at(-1);
    if (
      last &&
      (await market.client.getTransaction({ hash: last.hash }).then(
        () => true,
        () => false,
      ))
    )
      return ok({ ...order, swapTxs: sent.error.txs });
    return orderFailed('swap_not_sent', sent.error.message, { ...order, swapTxs: [] });
  }

  async confirmSwap(order: StockOrder, signal: AbortSignal): Promise<OrderStep> {
    const mined = await awaitMined(this.#d.courier, order.swapTxs, (txs) => this.#d.trail(order.id, 'swapTxs', txs), signal);
    const next = { ...order, swapTxs: mined.txs, swapTx: mined.receipt.transactionHash };
    if (mined.receipt.status !== 'success') return orderFailed('swap_reverted', `swap ${mined.receipt.transactionHash} reverted (the price moved below the floor, or the deadline passed)`, next);
    return ok({ ...next, delivered: StockMarket.delivered(mined.receipt, order.stock, order.recipient).toString() });
  }

  /** Stablecoin B back to the payer. */
  async refund(order: StockOrder): Promise<OrderStep> {
    // Failed attempts leave no trail behind (refused or reverted); one left here was signed: confirm it, sign nothing.
    if (order.refundTxs.length) return ok(order);
    const current = { ...order, refundAttempts: order.refundAttempts + 1 };
    const call = this.#d.market.refundCall(order.payer, BigInt(order.amount));
    try {
      const sent = await sendDurably(this.#d.courier, { ...call, gas: 120_000n }, [], (txs) => this.#d.trail(order.id, 'refundTxs', txs));
      if (sent.ok) return ok({ ...current, refundTxs: sent.value });
      this.#d.log.error('a refund could not be sent; it stays queued', { order: order.id, attempt: current.refundAttempts, why: sent.error.message });
      return orderFailed(order.failure?.reason ?? 'refund_not_sent', sent.error.message, { ...current, refundTxs: [] });
    } catch (err) {
      this.#d.log.error('a refund could not be sent; it stays queued', { order: order.id, attempt: current.refundAttempts, error: err });
      return orderFailed(order.failure?.reason ?? 'refund_not_sent', String(err), { ...current, refundTxs: [] });
    }
  }

  async confirmRefund(order: StockOrder, signal: AbortSignal): Promise<OrderStep> {
    const mined = await awaitMined(this.#d.courier, order.refundTxs, (txs) => this.#d.trail(order.id, 'refundTxs', txs), signal);
    if (mined.receipt.status !== 'success') {
      this.#d.log.error('a refund reverted; it is tried again', { order: order.id, tx: mined.receipt.transactionHash });
      return orderFailed('refund_reverted', `refund ${mined.receipt.transactionHash} reverted`, { ...order, refundTxs: [] });
    }
    return ok({ ...order, refundTxs: mined.txs, refundTx: mined.receipt.transactionHash });
  }

  /** The router pulls stablecoin B from the desk: one approval, once. */
  async approveRouter(signal: AbortSignal): Promise<void> {
    const { market, courier } = this.#d;
    const router = market.uniswap.router;
    if ((await market.allowance(market.stable, this.#d.desk, router)) >= maxUint256 / 2n) return;
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [router, maxUint256] });
    const sent = await sendDurably(courier, { to: market.stable, data, gas: 100_000n }, [], async () => {});
    if (!sent.ok) throw new Error(`the stock desk could not approve the router: ${sent.error.message}`);
    const mined = await awaitMined(courier, sent.value, async () => {}, signal);
    if (mined.receipt.status !== 'success') throw new Error('the stock desk router approval reverted');
    this.#d.log.info('stock desk approved the router', { desk: this.#d.desk, router, tx: mined.receipt.transactionHash });
  }

  #stock(order: StockOrder) {
    const stock = this.#d.market.stocks.find((s) => s.address.toLowerCase() === order.stock.toLowerCase());
    if (!stock) throw new Error(`stock ${order.symbol} is no longer listed`);
    return stock;
  }
}
