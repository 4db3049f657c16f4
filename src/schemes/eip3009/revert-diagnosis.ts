import { erc20Abi, type Address } from 'viem';
import type { Eip3009Payload } from '../../protocol/x402/types.ts';
import { Eip3009Reason, type InvalidReason } from '../../verify/reasons.ts';
import type { ChainReads } from '../scheme.ts';
import { authorizationStateAbi } from './abi.ts';

/**
 * Why an EIP-3009 settlement reverts, in the reference's terms: a token without `authorizationState` does not speak
 * EIP-3009; a used (or cancelled) authorization; a payer short of the amount; else the simulation failed.
 */
export async function diagnoseEip3009(chain: ChainReads, asset: Address, payload: Eip3009Payload): Promise<InvalidReason> {
  const a = payload.authorization;
  const [used, balance] = await Promise.all([
    chain.client.readContract({ address: asset, abi: authorizationStateAbi, functionName: 'authorizationState', args: [a.from, a.nonce] }).catch(() => undefined),
    chain.client.readContract({ address: asset, abi: erc20Abi, functionName: 'balanceOf', args: [a.from] }).catch(() => undefined),
  ]);
  if (used === undefined) return Eip3009Reason.eip3009NotSupported;
  if (used) return Eip3009Reason.nonceUsed;
  if (balance !== undefined && balance < BigInt(a.value)) return Eip3009Reason.insufficientBalance;
  return Eip3009Reason.simulationFailed;
}
