/**
 * What makes two payments the same: the key of the on-chain nonce a payment spends (one settlement per key, ever),
 * and the fingerprint of its signed terms (a repeat of the same payload is answered from the first one's record).
 * Read by whoever dedupes payments: the engine, the paywall's served claims, the remote settlement, the stock desk.
 */
import { createHash } from 'node:crypto';
import type { VerifyRequest } from '../protocol/x402/types.ts';
import { schemeOfPayload } from './registry.ts';

/** The key of the on-chain nonce the payment spends, in its scheme's own terms. */
export function nonceKeyOf(request: VerifyRequest): string {
  return schemeOfPayload(request.paymentPayload.payload).nonceKey(request);
}

/** Same signature over the same terms for the same requirements: the same payment. */
export function fingerprintOf(request: VerifyRequest): string {
  const r = request.paymentRequirements;
  const material = JSON.stringify([r.network, r.asset.toLowerCase(), r.payTo.toLowerCase(), r.amount, request.paymentPayload.payload]);
  return createHash('sha256').update(material).digest('hex');
}
