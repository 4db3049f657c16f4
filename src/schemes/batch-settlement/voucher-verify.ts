/**
 * `/verify` of a `voucher` (or `refund`) payload of the `batch-settlement` scheme, as the official facilitator
 * (`@x402/evm` 2.27.0 `verifyVoucher`) judges it: the channel config binds to the offer, the voucher is signed by the
 * channel's payer authorizer (or the payer), the channel exists on chain, and the voucher's ceiling is within its
 * balance and above what is claimed (a refund's zero-charge voucher may equal it). Nothing is sent: a voucher is
 * settled by the receiver's claims, never by /settle.
 */
import { chainIdOf } from '../../chain/canonical.ts';
import type { VerifyRequest, VerifyResponse } from '../../protocol/x402/types.ts';
import type { ChainReads } from '../scheme.ts';
import { checkChannelBinding } from './binding.ts';
import { channelStateOf, readChannel } from './channel-reads.ts';
import type { RefundPayload, VoucherPayload } from './payload.ts';
import { BatchReason } from '../../verify/batch-settlement-reasons.ts';
import type { BatchSettlementRequirements } from './requirements.ts';
import { voucherSignedFor } from './voucher-signature.ts';

export async function verifyVoucherPayload(reads: ChainReads, request: VerifyRequest, payload: VoucherPayload | RefundPayload): Promise<VerifyResponse> {
  const offer = request.paymentRequirements as unknown as BatchSettlementRequirements;
  const payer = payload.config.payer;
  const refused = (invalidReason: string, invalidMessage: string): VerifyResponse => ({ isValid: false, invalidReason, invalidMessage, payer });
  const binding = checkChannelBinding(payload.config, payload.voucher.channelId, offer);
  if (!binding.ok) return refused(binding.error.code, binding.error.message);
  if (!(await voucherSignedFor(reads, payload.config, payload.voucher, chainIdOf(offer.network)))) return refused(BatchReason.voucherSignature, "the voucher is not signed by the channel's payer");
  let channel: Awaited<ReturnType<typeof readChannel>>;
  try {
    channel = await readChannel(reads.client, payload.voucher.channelId);
  } catch (error) {
    return refused(BatchReason.rpcReadFailed, `could not read the channel: ${(error as Error).message.slice(0, 200)}`);
  }
  if (channel.balance === 0n) return refused(BatchReason.channelNotFound, 'the channel has no balance');
  const ceiling = payload.voucher.maxClaimableAmount;
  if (ceiling > channel.balance) return refused(BatchReason.cumulativeExceedsBalance, `voucher ceiling ${ceiling} exceeds the channel balance ${channel.balance}`);
  const below = payload.type === 'refund' ? ceiling < channel.totalClaimed : ceiling <= channel.totalClaimed;
  if (below) return refused(BatchReason.cumulativeBelowClaimed, `voucher ceiling ${ceiling} does not exceed the claimed ${channel.totalClaimed}`);
  return { isValid: true, payer, extra: channelStateOf(payload.voucher.channelId, channel) };
}
