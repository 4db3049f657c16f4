import { hashTypedData, recoverAddress, type Address, type Hex } from 'viem';
import { sameAddress } from '../../verify/checks.ts';
import { batchSettlementDomain } from './domain.ts';
import type { ChannelConfig } from './channel-config.ts';

/** A payer's cumulative promise on one channel: the receiver may claim up to `maxClaimableAmount` in total. */
export interface Voucher {
  channelId: Hex;
  maxClaimableAmount: bigint;
}

export interface SignedVoucher extends Voucher {
  signature: Hex;
}

export const voucherTypes = {
  Voucher: [
    { name: 'channelId', type: 'bytes32' },
    { name: 'maxClaimableAmount', type: 'uint128' },
  ],
} as const;

/** The EIP-712 typed data a payer signs for `voucher` on `chainId`. */
export function voucherTypedData(voucher: Voucher, chainId: number) {
  return {
    domain: batchSettlementDomain(chainId),
    types: voucherTypes,
    primaryType: 'Voucher' as const,
    message: { channelId: voucher.channelId, maxClaimableAmount: voucher.maxClaimableAmount },
  };
}

/** The digest the contract's `getVoucherDigest` returns for `voucher`. */
export function voucherDigest(voucher: Voucher, chainId: number): Hex {
  return hashTypedData(voucherTypedData(voucher, chainId));
}

/** The address an ECDSA signature over `voucher` recovers to, or undefined when it is not a valid ECDSA signature. */
export async function recoverVoucherSigner(voucher: SignedVoucher, chainId: number): Promise<Address | undefined> {
  try {
    return await recoverAddress({ hash: voucherDigest(voucher, chainId), signature: voucher.signature });
  } catch {
    return undefined;
  }
}

/**
 * What a voucher's signature says without asking the chain:
 * - `valid`: it recovers to the committed `payerAuthorizer`, or (no authorizer committed) to the payer itself;
 * - `invalid`: a committed `payerAuthorizer` did not sign it (the contract accepts ECDSA only there);
 * - `needs_rpc`: no authorizer is committed and it does not recover to the payer: only the payer's EIP-1271
 *   `isValidSignature` can tell (a smart-wallet payer), which is I/O for the caller.
 */
export type VoucherSignatureVerdict = 'valid' | 'invalid' | 'needs_rpc';

export async function classifyVoucherSignature(config: Pick<ChannelConfig, 'payer' | 'payerAuthorizer'>, voucher: SignedVoucher, chainId: number): Promise<VoucherSignatureVerdict> {
  const signer = await recoverVoucherSigner(voucher, chainId);
  const committed = !/^0x0{40}$/i.test(config.payerAuthorizer);
  if (committed) return signer !== undefined && sameAddress(signer, config.payerAuthorizer) ? 'valid' : 'invalid';
  return signer !== undefined && sameAddress(signer, config.payer) ? 'valid' : 'needs_rpc';
}
