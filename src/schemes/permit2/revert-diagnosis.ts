import { erc20Abi, type Address } from 'viem';
import { PERMIT2_ADDRESS } from '../../chain/canonical.ts';
import type { Permit2Payload } from '../../protocol/x402/types.ts';
import { Permit2Reason, type InvalidReason } from '../../verify/reasons.ts';
import type { ChainReads } from '../scheme.ts';
import { nonceBitmapAbi } from './abi.ts';

/**
 * Why a Permit2 settlement reverts, in the reference's terms: no proxy or no Permit2 deployed; the payer short of the
 * amount; no (or too small an) allowance of Permit2 for the token; the nonce used; else the simulation failed.
 */
export async function diagnosePermit2(chain: ChainReads, proxy: Address, payload: Permit2Payload): Promise<InvalidReason> {
  const p = payload.permit2Authorization;
  const amount = BigInt(p.permitted.amount);
  const nonce = BigInt(p.nonce);
  if (!(await chain.hasCode(proxy)) || !(await chain.hasCode(PERMIT2_ADDRESS))) return Permit2Reason.proxyNotDeployed;
  const [balance, allowance, word] = await Promise.all([
    chain.client.readContract({ address: p.permitted.token, abi: erc20Abi, functionName: 'balanceOf', args: [p.from] }).catch(() => undefined),
    chain.client.readContract({ address: p.permitted.token, abi: erc20Abi, functionName: 'allowance', args: [p.from, PERMIT2_ADDRESS] }).catch(() => undefined),
    chain.client.readContract({ address: PERMIT2_ADDRESS, abi: nonceBitmapAbi, functionName: 'nonceBitmap', args: [p.from, nonce >> 8n] }).catch(() => undefined),
  ]);
  if (balance !== undefined && balance < amount) return Permit2Reason.insufficientBalance;
  if (allowance !== undefined && allowance < amount) return Permit2Reason.allowanceRequired;
  if (word !== undefined && ((word >> (nonce & 0xffn)) & 1n) === 1n) return Permit2Reason.nonceUsed;
  return Permit2Reason.simulationFailed;
}
