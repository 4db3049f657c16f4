/**
 * What a channel's verification reads from the chain: the channel (`channels`, `pendingWithdrawals`, `refundNonce`)
 * and the payer's token balance and Permit2 allowance. Each read through the client given; a failed read throws.
 */
import { erc20Abi, type Address, type Hex } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS, PERMIT2_ADDRESS } from '../../chain/canonical.ts';
import type { ChainReader } from '../scheme.ts';
import { batchSettlementAbi } from './abi.ts';
import type { OnchainChannel } from './cumulative.ts';

export async function readChannel(client: ChainReader, channelId: Hex): Promise<OnchainChannel> {
  const at = { address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi } as const;
  const [[balance, totalClaimed], [, initiatedAt], refundNonce] = await Promise.all([
    client.readContract({ ...at, functionName: 'channels', args: [channelId] }),
    client.readContract({ ...at, functionName: 'pendingWithdrawals', args: [channelId] }),
    client.readContract({ ...at, functionName: 'refundNonce', args: [channelId] }),
  ]);
  return { balance, totalClaimed, withdrawRequestedAt: Number(initiatedAt), refundNonce };
}

export function tokenBalance(client: ChainReader, token: Address, owner: Address): Promise<bigint> {
  return client.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [owner] });
}

export function permit2Allowance(client: ChainReader, token: Address, owner: Address): Promise<bigint> {
  return client.readContract({ address: token, abi: erc20Abi, functionName: 'allowance', args: [owner, PERMIT2_ADDRESS] });
}

/** A channel's state as the official facilitator answers it (verify `extra`, settle `extra.channelState`). */
export function channelStateOf(channelId: Hex, channel: OnchainChannel): { channelId: Hex; balance: string; totalClaimed: string; withdrawRequestedAt: number; refundNonce: string } {
  return {
    channelId,
    balance: channel.balance.toString(),
    totalClaimed: channel.totalClaimed.toString(),
    withdrawRequestedAt: channel.withdrawRequestedAt,
    refundNonce: channel.refundNonce.toString(),
  };
}
