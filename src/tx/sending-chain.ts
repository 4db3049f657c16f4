import type { Chain, PublicClient, Transport } from 'viem';
import type { Logger } from '../log/logger.ts';
import type { BlockWatcher } from './block-watcher.ts';
import type { Courier } from './courier.ts';
import type { RelayerPool } from './relayer-pool.ts';
import type { ReorgGuard } from './reorg-guard.ts';

/**
 * One chain's sending parts as the settlement engine owns them, lent to whatever else sends there (the payment
 * channels' claims): its client, its relayers (one nonce manager per chain, so no two senders race for a nonce), its
 * block watcher and its reorg guard.
 */
export interface SendingChain {
  client: PublicClient<Transport, Chain>;
  relayers: RelayerPool;
  watcher: BlockWatcher;
  reorgs: ReorgGuard | undefined;
  pollMs: number;
}

/** A courier over the chain's parts. */
export function courierOver(chain: SendingChain, log: Logger): Courier {
  return { pool: chain.relayers, client: chain.client, watcher: chain.watcher, reorgs: chain.reorgs, pollMs: chain.pollMs, log };
}
