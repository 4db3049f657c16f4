import type { Hex } from 'viem';
import { batchSettlementDomain } from './domain.ts';
import { channelIdOf, type ChannelConfig } from './channel-config.ts';

/**
 * One row of an on-chain claim: a payer's signed voucher and the cumulative total the receiver side claims with it
 * (at most the voucher's ceiling, at most the channel's balance). Rows that do not raise a channel's
 * `totalClaimed` change nothing on chain, so a claim can be retried.
 */
export interface VoucherClaim {
  config: ChannelConfig;
  maxClaimableAmount: bigint;
  signature: Hex;
  totalClaimed: bigint;
}

export const claimBatchTypes = {
  ClaimBatch: [{ name: 'claims', type: 'ClaimEntry[]' }],
  ClaimEntry: [
    { name: 'channelId', type: 'bytes32' },
    { name: 'maxClaimableAmount', type: 'uint128' },
    { name: 'totalClaimed', type: 'uint128' },
  ],
} as const;

/**
 * The EIP-712 `ClaimBatch` the receiver authorizer signs so that anyone may relay `claimWithSignature(rows, sig)`.
 * Every row must name the same receiver authorizer (the contract refuses a mix).
 */
export function claimBatchTypedData(rows: readonly VoucherClaim[], chainId: number) {
  return {
    domain: batchSettlementDomain(chainId),
    types: claimBatchTypes,
    primaryType: 'ClaimBatch' as const,
    message: {
      claims: rows.map((row) => ({ channelId: channelIdOf(row.config, chainId), maxClaimableAmount: row.maxClaimableAmount, totalClaimed: row.totalClaimed })),
    },
  };
}

/** The rows as the contract's `VoucherClaim[]` argument of `claim` and `claimWithSignature`. */
export function voucherClaimArgs(rows: readonly VoucherClaim[]) {
  return rows.map((row) => ({
    voucher: { channel: { ...row.config }, maxClaimableAmount: row.maxClaimableAmount },
    signature: row.signature,
    totalClaimed: row.totalClaimed,
  }));
}
