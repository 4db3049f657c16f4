/**
 * Where a request asking for the x402 `batch-settlement` scheme goes in the engine: a `deposit` is a payment like any
 * other (its scheme module is in `schemes/batch-settlement/deposit-scheme.ts`), a `voucher` or `refund` is verified
 * against the channel and never sent; anything else is refused here with the scheme's reason, in the official
 * facilitator's order (scheme, network, then the payload). Pure.
 */
import type { Address } from 'viem';
import type { VerifyRequest } from '../protocol/x402/types.ts';
import { BATCH_SETTLEMENT_SCHEME } from '../schemes/batch-settlement/domain.ts';
import { parseBatchPayload, type RefundPayload, type VoucherPayload } from '../schemes/batch-settlement/payload.ts';
import { BatchReason } from '../verify/batch-settlement-reasons.ts';
import { RequestReason } from '../verify/reasons.ts';

export type BatchRoute = { kind: 'exact' } | { kind: 'deposit' } | { kind: 'voucher'; payload: VoucherPayload | RefundPayload } | { kind: 'refused'; code: string; message: string; payer?: Address };

/** `networks`: where the scheme's contracts were found at start. */
export function batchRouteOf(request: VerifyRequest, networks: ReadonlySet<string>): BatchRoute {
  const req = request.paymentRequirements as { scheme: string; network: string };
  if (req.scheme !== BATCH_SETTLEMENT_SCHEME) return { kind: 'exact' };
  if (!networks.has(req.network)) return { kind: 'refused', code: RequestReason.unsupportedScheme, message: `${BATCH_SETTLEMENT_SCHEME} is not settled on ${req.network} here` };
  const accepted = request.paymentPayload.accepted as { scheme: string; network: string };
  if (accepted.scheme !== BATCH_SETTLEMENT_SCHEME) return { kind: 'refused', code: BatchReason.scheme, message: `the payload accepted ${accepted.scheme}` };
  if (accepted.network !== req.network) return { kind: 'refused', code: BatchReason.networkMismatch, message: `the payload is for ${accepted.network}, the requirements for ${req.network}` };
  const parsed = parseBatchPayload(request.paymentPayload.payload);
  if (!parsed.ok) return { kind: 'refused', code: parsed.error.code, message: parsed.error.message };
  if (parsed.value.type === 'deposit') return { kind: 'deposit' };
  return { kind: 'voucher', payload: parsed.value };
}
