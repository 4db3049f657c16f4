/**
 * The `batch-settlement` offer of a 402 (`PaymentRequirements` with the scheme's `extra`), and the corrective
 * `extra` a server adds when a client's cumulative amount is out of step with the channel.
 */
import type { Address, Hex } from 'viem';
import { err, ok, type Result } from '../../protocol/result.ts';
import { sameAddress } from '../../verify/checks.ts';
import { BATCH_SETTLEMENT_SCHEME, MAX_WITHDRAW_DELAY, MIN_WITHDRAW_DELAY } from './domain.ts';

export type AssetTransferMethod = 'eip3009' | 'permit2';

export interface BatchSettlementExtra {
  receiverAuthorizer: Address;
  withdrawDelay: number;
  /** The token's EIP-712 domain. */
  name: string;
  version: string;
  /** Absent means `eip3009`, as the official client reads it. */
  assetTransferMethod?: AssetTransferMethod;
  /** Atomic deposit target the client should use; at least `amount` when present. */
  minDeposit?: string;
  channelState?: ChannelStateExtra;
  voucherState?: VoucherStateExtra;
  [key: string]: unknown;
}

export interface BatchSettlementRequirements {
  scheme: typeof BATCH_SETTLEMENT_SCHEME;
  network: `eip155:${number}`;
  /** The per-request price (the voucher's increment), atomic units. */
  amount: string;
  asset: Address;
  payTo: Address;
  maxTimeoutSeconds: number;
  extra: BatchSettlementExtra;
}

/** A channel's snapshot as the spec puts it in `extra.channelState` (corrective 402s, payment responses). */
export interface ChannelStateExtra {
  channelId: Hex;
  balance: string;
  totalClaimed: string;
  withdrawRequestedAt: number;
  refundNonce: string;
  chargedCumulativeAmount?: string;
}

/** The last voucher the server holds, so the client can check the server's `chargedCumulativeAmount`. */
export interface VoucherStateExtra {
  signedMaxClaimable: string;
  signature: Hex;
}

export interface BatchOfferTerms {
  network: `eip155:${number}`;
  asset: Address;
  payTo: Address;
  price: bigint;
  maxTimeoutSeconds: number;
  receiverAuthorizer: Address;
  withdrawDelay: number;
  tokenName: string;
  tokenVersion: string;
  assetTransferMethod: AssetTransferMethod;
  minDeposit?: bigint;
}

export type OfferProblem = 'invalid_batch_offer';

const ZERO = /^0x0{40}$/i;

/** The requirements a 402 offers for `terms`, or why the terms cannot be offered (a configuration mistake). */
export function batchSettlementRequirements(terms: BatchOfferTerms): Result<BatchSettlementRequirements, OfferProblem> {
  if (terms.price <= 0n) return err('invalid_batch_offer', 'price must be positive');
  if (ZERO.test(terms.receiverAuthorizer)) return err('invalid_batch_offer', 'receiverAuthorizer must not be the zero address');
  if (!Number.isInteger(terms.withdrawDelay) || terms.withdrawDelay < MIN_WITHDRAW_DELAY || terms.withdrawDelay > MAX_WITHDRAW_DELAY) {
    return err('invalid_batch_offer', `withdrawDelay must be whole seconds in [${MIN_WITHDRAW_DELAY}, ${MAX_WITHDRAW_DELAY}], got ${terms.withdrawDelay}`);
  }
  if (terms.minDeposit !== undefined && terms.minDeposit < terms.price) return err('invalid_batch_offer', 'minDeposit must be at least the price');
  if (!Number.isInteger(terms.maxTimeoutSeconds) || terms.maxTimeoutSeconds <= 0) return err('invalid_batch_offer', 'maxTimeoutSeconds must be a positive integer');
  const extra: BatchSettlementExtra = {
    receiverAuthorizer: terms.receiverAuthorizer,
    withdrawDelay: terms.withdrawDelay,
    name: terms.tokenName,
    version: terms.tokenVersion,
    ...(terms.assetTransferMethod === 'permit2' ? { assetTransferMethod: 'permit2' as const } : {}),
    ...(terms.minDeposit !== undefined ? { minDeposit: terms.minDeposit.toString() } : {}),
  };
  return ok({
    scheme: BATCH_SETTLEMENT_SCHEME,
    network: terms.network,
    amount: terms.price.toString(),
    asset: terms.asset,
    payTo: terms.payTo,
    maxTimeoutSeconds: terms.maxTimeoutSeconds,
    extra,
  });
}

/** The offer with the corrective state a cumulative-amount mismatch answers with. */
export function correctiveRequirements(offer: BatchSettlementRequirements, channelState: ChannelStateExtra, voucherState: VoucherStateExtra | undefined): BatchSettlementRequirements {
  return { ...offer, extra: { ...offer.extra, channelState, ...(voucherState ? { voucherState } : {}) } };
}

/** The transfer method an offer asks deposits to use. */
export function transferMethodOf(offer: Pick<BatchSettlementRequirements, 'extra'>): AssetTransferMethod {
  return offer.extra.assetTransferMethod === 'permit2' ? 'permit2' : 'eip3009';
}

/** Whether two offers are the same terms (what a client's `accepted` must repeat of the server's offer). */
export function sameOffer(a: BatchSettlementRequirements, b: BatchSettlementRequirements): boolean {
  return (
    a.scheme === b.scheme &&
    a.network === b.network &&
    a.amount === b.amount &&
    sameAddress(a.asset, b.asset) &&
    sameAddress(a.payTo, b.payTo) &&
    sameAddress(String(a.extra.receiverAuthorizer), String(b.extra.receiverAuthorizer)) &&
    Number(a.extra.withdrawDelay) === Number(b.extra.withdrawDelay)
  );
}
