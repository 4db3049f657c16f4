import { rpcCall } from '../../src/chain/rpc.ts';

/**
 * Takes back every block above `keep` on an anvil chain (`anvil_reorg`: they are replaced by as many empty ones) and
 * answers the height the chain had, now reorganised. Mining is held meanwhile: a transaction a gateway sends between
 * the read of the head and the reorg would otherwise add a block, and the reorg would then take back one block too
 * few (seen: a swap's funding payment kept, a settlement's block left). Whatever was sent while mining was held is
 * mined after.
 */
export async function reorgAbove(rpcUrl: string, keep: bigint): Promise<bigint> {
  await rpcCall(rpcUrl, 'evm_setAutomine', [false]);
  try {
    const top = BigInt(await rpcCall<string>(rpcUrl, 'eth_blockNumber', []));
    await rpcCall(rpcUrl, 'anvil_reorg', [Number(top - keep), []]);
    return top;
  } finally {
    await rpcCall(rpcUrl, 'evm_setAutomine', [true]);
    const pool = await rpcCall<{ pending: string }>(rpcUrl, 'txpool_status', []);
    if (BigInt(pool.pending) > 0n) await rpcCall(rpcUrl, 'evm_mine', []);
  }
}
