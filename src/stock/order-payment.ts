import type { Address } from 'viem';
import type { Logger } from '../log/logger.ts';
import { SETTLEMENT_SHED } from '../ports/settlement.ts';
import { ok } from '../protocol/result.ts';
import type { SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import { sleep } from '../tx/courier.ts';
import type { PaymentEvidence, StockMarket } from './market.ts';
import { orderFailed, type OrderStep, type StockOrder } from './order-record.ts';

/** What settling an order's payment needs: the settlement port, the chain to ask, the desk it pays, and time. */
export interface OrderPaymentDeps {
  /** Settles a buyer's payment (the settlement engine, or remote facilitators). */
  settle(request: VerifyRequest): Promise<SettleResponse>;
  market: StockMarket;
  /** The desk's address: the payee of every order's payment. */
  desk: Address;
  pollMs: number;
  log: Logger;
  now: () => number;
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

/**
 * Settles the payment; a pending settlement is waited for, never paid again. A settlement that reports failure
 * (or throws) is not taken at its word: the chain is asked whether the payment reached the desk anyway (copied
 * from the mempool and sent by someone else first, or our own send that landed despite an error). If it did, the
 * order goes on as settled; it is rejected ("nothing charged") only when the chain shows the desk holds nothing
 * of it. While the chain cannot be asked, the order waits in `settling`.
 */
export async function settleOrderPayment(d: OrderPaymentDeps, order: StockOrder, signal: AbortSignal): Promise<OrderStep> {
  let thrown = 0;
  for (;;) {
    if (signal.aborted) throw new Error('stopped while settling');
    let r: SettleResponse | undefined;
    try {
      r = await d.settle(order.payment);
    } catch (err) {
      d.log.warn('settlement threw; the chain is asked whether the payment moved', { order: order.id, error: err });
    }
    if (r?.success) return ok({ ...order, payer: (r.payer as Address | undefined) ?? order.payer, settlement: r });
    if (r?.status === 'pending') {
      await sleep(d.pollMs, signal);
      continue;
    }
    // Turned away for backpressure (the settlement queue is behind) before anything was verified or charged: no
    // refusal of this payment. The order waits in `settling` for the Retry-After the answer names and asks again,
    // while the payment's permit is still valid; past it, the settlement's own answer decides.
    if (r?.errorReason === SETTLEMENT_SHED && d.now() < permitDeadlineMs(order)) {
      d.log.info('settlement shed; the order asks again after its Retry-After', { order: order.id, reason: r.extra?.reason });
      await sleep(retryAfterMs(r), signal);
      continue;
    }
    let evidence: PaymentEvidence;
    try {
      evidence = await paymentEvidence(d, order);
    } catch (err) {
      d.log.warn('cannot tell whether a payment moved; asking again', { order: order.id, error: err });
      await sleep(Math.max(d.pollMs, 1000), signal);
      continue;
    }
    if (evidence.moved) {
      d.log.warn('the settlement reported failure, but the payment reached the desk: the order goes on', {
        order: order.id,
        reported: r?.errorReason ?? 'an error',
        transaction: evidence.transaction,
      });
      const settlement: SettleResponse = { success: true, transaction: evidence.transaction, network: order.network as SettleResponse['network'], payer: order.payer };
      return ok({ ...order, settlement });
    }
    // A settlement that threw is asked again a few times while the payment has not moved: it may yet settle.
    if (r === undefined && ++thrown < 5) {
      await sleep(Math.max(d.pollMs, 500), signal);
      continue;
    }
    const reason = r?.errorReason ?? 'settlement_error';
    const message = `${r?.errorMessage ?? 'the settlement failed'}${evidence.nonceUsed ? ' (the permit nonce is used, but no transfer of this payment to the desk is on chain)' : ''}`;
    return orderFailed(reason, message, r ? { ...order, settlement: r } : order);
  }
}

/** What the chain says of this order's payment: a Permit2 witness transfer to the desk. */
async function paymentEvidence(d: OrderPaymentDeps, order: StockOrder): Promise<PaymentEvidence> {
  const payload = order.payment.paymentPayload.payload;
  if (!('permit2Authorization' in payload)) throw new Error('a stock order is paid with Permit2');
  const p = payload.permit2Authorization;
  return d.market.permit2Evidence({ from: p.from as Address, to: d.desk, amount: BigInt(order.amount), nonce: BigInt(p.nonce) }, order.sinceBlock === undefined ? undefined : BigInt(order.sinceBlock));
}
