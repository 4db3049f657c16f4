import type { Hex } from 'viem';
import { batchSettlementDomain } from './domain.ts';

/**
 * A cooperative refund the receiver authorizer signs: up to `amount` of the channel's unclaimed escrow back to the
 * payer, valid for exactly one `nonce` (the contract's `refundNonce(channelId)` at submission). The contract
 * advances the nonce before it caps the amount, so a signed refund can never be replayed, even one that moved nothing.
 */
export interface RefundAuthorization {
  channelId: Hex;
  nonce: bigint;
  amount: bigint;
}

export const refundTypes = {
  Refund: [
    { name: 'channelId', type: 'bytes32' },
    { name: 'nonce', type: 'uint256' },
    { name: 'amount', type: 'uint128' },
  ],
} as const;

export function refundTypedData(refund: RefundAuthorization, chainId: number) {
  return {
    domain: batchSettlementDomain(chainId),
    types: refundTypes,
    primaryType: 'Refund' as const,
    message: { channelId: refund.channelId, nonce: refund.nonce, amount: refund.amount },
  };
}

/**
 * What a refund of `requested` (undefined: everything) will return, given the channel's on-chain `balance` and the
 * `totalClaimed` it will have once the refund's own claim rows are in: the unclaimed escrow caps it.
 */
export function refundableAmount(balance: bigint, totalClaimedAfterClaims: bigint, requested: bigint | undefined): bigint {
  const unclaimed = balance > totalClaimedAfterClaims ? balance - totalClaimedAfterClaims : 0n;
  if (requested === undefined) return unclaimed;
  return requested < unclaimed ? requested : unclaimed;
}
