import type { Address } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS } from '../../chain/canonical.ts';

/** The scheme's name on the wire (`PaymentRequirements.scheme`). */
export const BATCH_SETTLEMENT_SCHEME = 'batch-settlement';

/** Bounds of a channel's `withdrawDelay`, in seconds: 15 minutes to 30 days (the contract enforces them too). */
export const MIN_WITHDRAW_DELAY = 900;
export const MAX_WITHDRAW_DELAY = 2_592_000;

/** The largest value of a `uint128` (vouchers, deposits and claims are `uint128` on chain). */
export const MAX_UINT128 = (1n << 128n) - 1n;

export interface BatchSettlementDomain {
  name: 'x402 Batch Settlement';
  version: '1';
  chainId: number;
  verifyingContract: Address;
}

/**
 * The EIP-712 domain of channel ids, vouchers, claim batches and refunds: the settlement contract at its canonical
 * address is the verifying contract, so every signature is bound to one chain and one deployment.
 */
export function batchSettlementDomain(chainId: number, verifyingContract: Address = BATCH_SETTLEMENT_ADDRESS): BatchSettlementDomain {
  return { name: 'x402 Batch Settlement', version: '1', chainId, verifyingContract };
}
