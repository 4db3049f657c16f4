import { hashTypedData, type Address, type Hex } from 'viem';
import { sameAddress } from '../../verify/checks.ts';
import { domainSeparator, keccakBytes } from '../../verify/signature/digest.ts';
import { writeBytes32, writeUint256 } from '../../verify/signature/bytes.ts';
import { recoverSigner } from '../../verify/signature/recover.ts';
import { batchSettlementDomain, MAX_UINT128 } from './domain.ts';
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

const VOUCHER_TYPEHASH = keccakBytes(new TextEncoder().encode('Voucher(bytes32 channelId,uint128 maxClaimableAmount)'));
/** `typeHash ‖ channelId ‖ amount`, then `0x1901 ‖ separator ‖ structHash`: scratch, everything here is synchronous. */
const STRUCT = new Uint8Array(96);
const STRUCT_VIEW = new DataView(STRUCT.buffer);
const FINAL = new Uint8Array(66);
STRUCT.set(VOUCHER_TYPEHASH, 0);
FINAL[0] = 0x19;
FINAL[1] = 0x01;

/**
 * `voucherDigest` as bytes, by the project's keccak and cached domain separators (viem's typed-data hashing costs
 * ~15x more): undefined when the channel id is not 32 bytes of hex or the amount is not a uint128.
 */
export function voucherDigestBytes(voucher: Voucher, chainId: number): Uint8Array | undefined {
  if (voucher.maxClaimableAmount < 0n || voucher.maxClaimableAmount > MAX_UINT128) return undefined;
  if (!writeBytes32(voucher.channelId, STRUCT, 32) || !writeUint256(voucher.maxClaimableAmount, STRUCT_VIEW, 64)) return undefined;
  FINAL.set(domainSeparator(batchSettlementDomain(chainId)), 2);
  FINAL.set(keccakBytes(STRUCT), 34);
  return keccakBytes(FINAL);
}

/**
 * The address an ECDSA signature over `voucher` recovers to (libsecp256k1), or undefined when it is not a signature
 * the settlement contract would accept from an EOA: malformed, high-s, or a 65-byte signature whose v is not 27 or
 * 28 (the contract's ecrecover takes no other, so a voucher signed with v 0 or 1 could never be claimed).
 */
export function recoverVoucherSigner(voucher: SignedVoucher, chainId: number): Address | undefined {
  const { signature } = voucher;
  if (typeof signature !== 'string') return undefined;
  if (signature.length === 132 && !/^(1b|1c)$/i.test(signature.slice(130))) return undefined;
  const digest = voucherDigestBytes(voucher, chainId);
  return digest === undefined ? undefined : recoverSigner(digest, signature);
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
  const signer = recoverVoucherSigner(voucher, chainId);
  const committed = !/^0x0{40}$/i.test(config.payerAuthorizer);
  if (committed) return signer !== undefined && sameAddress(signer, config.payerAuthorizer) ? 'valid' : 'invalid';
  return signer !== undefined && sameAddress(signer, config.payer) ? 'valid' : 'needs_rpc';
}
