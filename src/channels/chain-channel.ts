/**
 * Reads a channel's state from the settlement contract (`channels`, `pendingWithdrawals`, `refundNonce`) in one
 * `eth_call` each, bounded in time: what the gateway trusts about a channel's balance before it accepts a voucher it
 * holds no record for, and after a deposit.
 */
import { decodeFunctionResult, encodeFunctionData, type Abi, type Hex } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS } from '../chain/canonical.ts';
import { rpcCall } from '../chain/rpc.ts';
import { batchSettlementAbi } from '../schemes/batch-settlement/abi.ts';
import type { OnchainChannel } from '../schemes/batch-settlement/cumulative.ts';

/** Reads one channel's on-chain state on a network (CAIP-2). */
export type ChannelReader = (network: string, channelId: Hex) => Promise<OnchainChannel>;

async function call(rpcUrl: string, functionName: 'channels' | 'pendingWithdrawals' | 'refundNonce', channelId: Hex, timeoutMs: number): Promise<unknown> {
  const abi = batchSettlementAbi as Abi;
  const data = encodeFunctionData({ abi, functionName, args: [channelId] });
  const raw = await rpcCall<Hex>(rpcUrl, 'eth_call', [{ to: BATCH_SETTLEMENT_ADDRESS, data }, 'latest'], timeoutMs);
  return decodeFunctionResult({ abi, functionName, data: raw });
}

/** A reader over each network's RPC URL (`rpcUrlOf` undefined: the network is not configured, the read throws). */
export function rpcChannelReader(rpcUrlOf: (network: string) => string | undefined, timeoutMs = 5_000): ChannelReader {
  return async (network, channelId) => {
    const url = rpcUrlOf(network);
    if (url === undefined) throw new Error(`network ${network} is not configured`);
    const [channel, pending, nonce] = await Promise.all([
      call(url, 'channels', channelId, timeoutMs),
      call(url, 'pendingWithdrawals', channelId, timeoutMs),
      call(url, 'refundNonce', channelId, timeoutMs),
    ]);
    const [balance, totalClaimed] = channel as readonly [bigint, bigint];
    const [, initiatedAt] = pending as readonly [bigint, number];
    return { balance, totalClaimed, withdrawRequestedAt: Number(initiatedAt), refundNonce: nonce as bigint };
  };
}
