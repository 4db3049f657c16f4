import { rpcCall } from '../../src/chain/rpc.ts';

/** What {@link reorgAbove} did: the height the chain had, and whether every block above `keep` is now another. */
export interface Reorg {
  top: bigint;
  replaced: boolean;
}

const hashAt = async (rpcUrl: string, n: bigint) => (await rpcCall<{ hash: string } | null>(rpcUrl, 'eth_getBlockByNumber', [`0x${n.toString(16)}`, false]))?.hash;

/**
 * Takes back every block above `keep` on an anvil chain (`anvil_reorg`: they are replaced by as many new ones).
 * Mining is held meanwhile: a transaction a gateway sends between the read of the head and the reorg would otherwise
 * add a block, and the reorg would then take back one block too few. Whatever was sent while mining was held is
 * mined after. What the new blocks hold is not promised: a gateway that notices the reorg while anvil makes them may
 * have its transactions sent again taken into them, so a test tells the reorg by its blocks (`replaced`), not by a
 * balance at its height.
 */
export async function reorgAbove(rpcUrl: string, keep: bigint): Promise<Reorg> {
  await rpcCall(rpcUrl, 'evm_setAutomine', [false]);
  try {
    const top = BigInt(await rpcCall<string>(rpcUrl, 'eth_blockNumber', []));
    const heights = Array.from({ length: Number(top - keep) }, (_, i) => keep + 1n + BigInt(i));
    const before = await Promise.all(heights.map((n) => hashAt(rpcUrl, n)));
    await rpcCall(rpcUrl, 'anvil_reorg', [heights.length, []]);
    const after = await Promise.all(heights.map((n) => hashAt(rpcUrl, n)));
    return { top, replaced: heights.length > 0 && before.every((h, i) => h !== undefined && after[i] !== undefined && h !== after[i]) };
  } finally {
    await rpcCall(rpcUrl, 'evm_setAutomine', [true]);
    const pool = await rpcCall<{ pending: string }>(rpcUrl, 'txpool_status', []);
    if (BigInt(pool.pending) > 0n) await rpcCall(rpcUrl, 'evm_mine', []);
  }
}
