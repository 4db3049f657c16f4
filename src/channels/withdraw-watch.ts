/**
 * Watches the settlement contract for what changes a channel's escrow behind the gateway's back: a payer's
 * `initiateWithdraw` (its deadline: every accepted voucher must be claimed before the withdrawal can be finalized),
 * `finalizeWithdraw` and refunds (the balance falls: no voucher may be accepted beyond it). One `eth_getLogs` per
 * range of blocks, whatever the number of channels; the scanned height is kept in the store, so a restart neither
 * misses an event nor rescans from the beginning.
 */
import type { AbiEvent, Chain, Hex, PublicClient, Transport } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS } from '../chain/canonical.ts';
import { batchSettlementAbi } from '../schemes/batch-settlement/abi.ts';
import type { DurableCollection } from '../store/durable-collection.ts';

const WATCHED = new Set(['WithdrawInitiated', 'WithdrawFinalized', 'Refunded']);
const EVENTS = (batchSettlementAbi as readonly { type: string; name?: string }[]).filter((item) => item.type === 'event' && WATCHED.has(item.name ?? '')) as AbiEvent[];

/** The most blocks one `eth_getLogs` asks for (what public RPCs allow). */
const CHUNK_BLOCKS = 500n;

export interface WithdrawWatch {
  network: string;
  client: PublicClient<Transport, Chain>;
  /** The scanned height of each network (decimal block number). */
  cursors: DurableCollection<string>;
  /** How far below the head a first scan starts. */
  lookbackBlocks: bigint;
  /** The most blocks scanned in one round (the rest in the next ones). */
  maxBlocksPerRound: bigint;
}

/**
 * The channels whose withdrawal or refund events appeared since the last scan (the caller reads each again), and
 * the height scanned to (`caughtUp`: the head): write it with {@link advance} once what the channels need is recorded.
 */
export async function withdrawEvents(w: WithdrawWatch): Promise<{ channels: Set<Hex>; scannedTo: bigint | undefined; caughtUp: boolean }> {
  const head = await w.client.getBlockNumber();
  const stored = await w.cursors.get(w.network);
  const from = stored !== undefined ? BigInt(stored) + 1n : head > w.lookbackBlocks ? head - w.lookbackBlocks : 0n;
  const channels = new Set<Hex>();
  if (from > head) return { channels, scannedTo: undefined, caughtUp: true };
  const last = from + w.maxBlocksPerRound - 1n < head ? from + w.maxBlocksPerRound - 1n : head;
  for (let start = from; start <= last; start += CHUNK_BLOCKS) {
    const end = start + CHUNK_BLOCKS - 1n < last ? start + CHUNK_BLOCKS - 1n : last;
    const logs = await w.client.getLogs({ address: BATCH_SETTLEMENT_ADDRESS, events: EVENTS, fromBlock: start, toBlock: end });
    for (const log of logs) {
      const id = (log as { args?: { channelId?: Hex } }).args?.channelId;
      if (id) channels.add(id.toLowerCase() as Hex);
    }
  }
  return { channels, scannedTo: last, caughtUp: last === head };
}

/** Records the height scanned to (after the channels it named are recorded). */
export async function advance(w: Pick<WithdrawWatch, 'network' | 'cursors'>, scannedTo: bigint | undefined): Promise<void> {
  if (scannedTo !== undefined) await w.cursors.put(w.network, scannedTo.toString());
}
