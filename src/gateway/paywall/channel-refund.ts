/**
 * A cooperative refund asked through a paid route (x402 `batch-settlement`, a `refund` payload): the route's upstream
 * is never called and its breaker is not asked. What costs nothing is checked here first (the zero-charge voucher's
 * signature, the channel's record, what is left to refund, the amount asked); only a refund that moves money the payer
 * is owed reaches the refund desk (`channels/refund-desk.ts`), whose actor holds the channel, claims what was charged,
 * sweeps it to the merchant and returns the rest to the payer in one transaction the gateway's relayer pays for.
 *
 * Answers, as the official client reads them: 200 with `PAYMENT-RESPONSE` (`transaction`, `amount` refunded,
 * `extra.channelState`) when refunded; 402 with the spec's reason otherwise (a corrective 402 when the voucher is not
 * exactly what was charged), never a 5xx for the payer's mistake; 202 when the transaction is sent and not yet mined.
 */
import type { Hex } from 'viem';
import type { ChannelRefunds } from '../../channels/refund-desk.ts';
import { refundChannelState } from '../../channels/refund-steps.ts';
import { CHANNEL_PROTOCOL, type ChannelCredential } from '../../front-door/batch-settlement.ts';
import type { PaidCredential } from '../../front-door/door.ts';
import type { HttpResponse } from '../../http/server.ts';
import type { SettleResponse } from '../../protocol/x402/types.ts';
import { decideRefund } from '../../channels/refund-steps.ts';
import { RefundRefusal } from '../../channels/refund-machine.ts';
import { classifyVoucherSignature } from '../../schemes/batch-settlement/voucher.ts';
import { BatchReason } from '../../verify/batch-settlement-reasons.ts';
import { json } from './answers.ts';
import { corrective, refusedWith, type ChannelPurchase, type PaywallChannels } from './channel-paid.ts';

/** What the paywall needs to refund channels: the desk, how long a request waits for the refund, the smallest partial one. */
export interface PaywallRefunds {
  desk: Pick<ChannelRefunds, 'refund' | 'open'>;
  waitMs: number;
  minRefund: bigint;
}

/** Why the refund would be refused from this view of the channel, or undefined. */
function refusalOf(chain: { balance: bigint; totalClaimed: bigint }, charged: bigint, requested: bigint | undefined, minRefund: bigint): RefundRefusal | undefined {
  try {
    decideRefund({ ...chain, withdrawRequestedAt: 0, refundNonce: 0n }, charged, requested, minRefund);
    return undefined;
  } catch (error) {
    if (error instanceof RefundRefusal) return error;
    throw error;
  }
}

/** A refund refused with the spec's reason: in the 402's `error`, and in a failed `PAYMENT-RESPONSE` with what to do. */
function refundRefused(p: ChannelPurchase, c: PaywallChannels, reason: string, message?: string): HttpResponse {
  const cred = p.credential as ChannelCredential;
  const network = cred.offer.network as SettleResponse['network'];
  return refusedWith(p, c, reason, { success: false, transaction: '', network, payer: cred.payload.config.payer.toLowerCase(), errorReason: reason, ...(message ? { errorMessage: message } : {}) });
}

const pendingRefund = (transaction: string | undefined, network: string) =>
  json(202, {
    status: 'pending',
    transaction,
    network,
    detail: 'the refund transaction is sent and not yet confirmed; its outcome shows on chain (the channel takes no payment until it ends)',
  });

/** Whether a credential asks for a channel refund (the paid route hands it here before anything else). */
export function isChannelRefund(credential: PaidCredential): boolean {
  return credential.protocol === CHANNEL_PROTOCOL && (credential as ChannelCredential).payload.type === 'refund';
}

export async function channelRefund(p: ChannelPurchase, c: PaywallChannels): Promise<HttpResponse> {
  const cred = p.credential as ChannelCredential;
  const { payload, offer } = cred;
  if (payload.type !== 'refund' || !c.refunds) return refundRefused(p, c, BatchReason.refundPayload, 'refunds are not taken here');
  const refunds = c.refunds;
  if ((await classifyVoucherSignature(payload.config, payload.voucher, cred.chainId)) !== 'valid')
    return refundRefused(p, c, BatchReason.voucherSignature, "the zero-charge voucher is not signed by the channel's payer");
  const held = await c.ledger.read(cred.channelId);
  if (!held) return refundRefused(p, c, BatchReason.missingChannel, 'the gateway holds no record of this channel: nothing was charged on it here');
  const r = held.record;
  // Busy while a voucher is served or another refund holds it (a hold whose refund ended is stale: the desk passes it).
  if (r.refunding && (await refunds.desk.open(r.refunding.id))) return refundRefused(p, c, BatchReason.channelBusy, 'a refund of this channel is under way');
  if (r.pending === undefined && BigInt(r.charged) !== payload.voucher.maxClaimableAmount) return corrective(p, c, r);
  // What the record says is left: refused here without a transaction (the desk decides again from the chain).
  const refusal = refusalOf({ balance: BigInt(r.balance), totalClaimed: BigInt(r.totalClaimed) }, BigInt(r.charged), payload.amount, refunds.minRefund);
  if (refusal?.reason === BatchReason.refundNoBalance) {
    // Nothing left as last recorded: a top-up made elsewhere is read from the chain (budgeted, shared), else refused.
    const chain = await c.readChannel(offer.network, cred.channelId).catch(() => undefined);
    const again = chain ? refusalOf(chain, BigInt(r.charged), payload.amount, refunds.minRefund) : refusal;
    if (again) return refundRefused(p, c, again.reason, again.message);
  } else if (refusal) {
    return refundRefused(p, c, refusal.reason, refusal.message);
  }
  const { record, waiting } = await refunds.desk.refund(
    { network: offer.network, channelId: cred.channelId, config: payload.config, voucher: payload.voucher, ...(payload.amount !== undefined ? { requested: payload.amount } : {}) },
    refunds.waitMs,
  );
  if (waiting || record.state === 'stalled') return pendingRefund(record.txs.at(-1)?.hash, offer.network);
  if (record.state === 'refused') {
    const reason = record.reason ?? BatchReason.refundSimulationFailed;
    if (reason === BatchReason.cumulativeAmountMismatch) {
      const now = await c.ledger.read(cred.channelId);
      if (now) return corrective(p, c, now.record);
    }
    return refundRefused(p, c, reason, record.failure);
  }
  if (record.state === 'refunded') {
    c.counted?.(offer.network, 'refunded');
    const settlement: SettleResponse = {
      success: true,
      transaction: record.tx as Hex,
      network: offer.network as SettleResponse['network'],
      payer: payload.config.payer.toLowerCase(),
      amount: record.refunded ?? '0',
      extra: { channelState: record.channelState ?? refundChannelState(r) },
    };
    const receipt = await p.door.receipt(settlement, cred);
    return json(200, { message: 'Refund acknowledged', channelId: cred.channelId, refunded: record.refunded, transaction: record.tx }, receipt);
  }
  // failed (nothing sent: our node refused it) or reverted (mined, nothing moved): the gateway's side, not the payer's.
  p.deps.log.warn('a channel refund did not go through', { channel: cred.channelId, state: record.state, failure: record.failure, tx: record.tx });
  return json(
    503,
    {
      error: 'the refund could not be sent right now; nothing was refunded and nothing charged: ask again',
      code: BatchReason.refundTransactionFailed,
      ...(record.tx ? { transaction: record.tx } : {}),
    },
    { 'retry-after': '5' },
  );
}
