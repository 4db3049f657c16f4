import type { ChainReads } from '../scheme.ts';
import type { ChannelConfig } from './channel-config.ts';
import { classifyVoucherSignature, voucherDigest, type SignedVoucher } from './voucher.ts';

/**
 * Whether the channel's voucher signer signed `voucher`: its committed `payerAuthorizer` by ECDSA, or (none
 * committed) the payer's key or, for a payer contract, its ERC-1271 `isValidSignature` (one chain read).
 */
export async function voucherSignedFor(reads: ChainReads, config: ChannelConfig, voucher: SignedVoucher, chainId: number): Promise<boolean> {
  const verdict = await classifyVoucherSignature(config, voucher, chainId);
  if (verdict !== 'needs_rpc') return verdict === 'valid';
  if (!(await reads.hasCode(config.payer))) return false;
  return (await reads.erc1271Valid?.(config.payer, voucherDigest(voucher, chainId), voucher.signature)) ?? false;
}
