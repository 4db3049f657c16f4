import type { ConsumptionSearch } from './scheme.ts';

const DEFAULT_CHUNK_BLOCKS = 500n;

/**
 * Block ranges from the head down, `lookbackBlocks` deep, newest first, in ranges of `chunkBlocks` (what public RPCs
 * allow for eth_getLogs).
 */
export function* rangesBelow(head: bigint, search: ConsumptionSearch): Generator<{ fromBlock: bigint; toBlock: bigint }> {
  const chunk = search.chunkBlocks && search.chunkBlocks > 0n ? search.chunkBlocks : DEFAULT_CHUNK_BLOCKS;
  const floor = head > search.lookbackBlocks ? head - search.lookbackBlocks : 0n;
  for (let to = head; to >= floor; ) {
    const from = to - chunk + 1n > floor ? to - chunk + 1n : floor;
    yield { fromBlock: from, toBlock: to };
    if (from === floor) return;
    to = from - 1n;
  }
}
