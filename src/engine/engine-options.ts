import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { Store } from '../store/open-store.ts';
import type { BlockWatcher } from '../tx/block-watcher.ts';
import type { ReorgGuard } from '../tx/reorg-guard.ts';
import type { RelayerPool } from '../tx/relayer-pool.ts';
import type { RevertBudgetLimits } from './revert-budget.ts';
import type { AdmissionLimits } from './settlement-admission.ts';
import type { VerifyDeps } from './verify-payment.ts';

/** What the settlement engine is built from: the world it settles in (chains, store, clock) and its settings. */
export interface EngineOptions extends VerifyDeps {
  store: Store;
  relayers(caip2: string): RelayerPool;
  /** The chain's one block watcher, which every payment in flight on it awaits its receipt from. */
  watcher(caip2: string): BlockWatcher;
  /** The chain's reorg guard, which every mined settlement is handed to (none: reorgs are not watched). */
  reorgs?(caip2: string): ReorgGuard | undefined;
  /** How long /settle waits for a receipt before it answers pending with the broadcast hash. */
  confirmDeadlineMs: number;
  /** How often the chain head is read while transactions are in flight. */
  pollMs: number;
  /** Whether /verify simulates the transfer on chain (settle always does). */
  simulateOnVerify: boolean;
  /**
   * Settlement batching: the most payments per transaction, how long the first waits for others (1 or 0: off), and
   * whether a batch leaves early when no payment is on its way to it.
   */
  batch: { maxSize: number; windowMs: number; eager: boolean };
  /**
   * How many blocks below the head are searched for the transaction that consumed an authorization, after a
   * settlement failed or its outcome is unknown (see `authorization-consumption.ts`).
   */
  consumedLookbackBlocks?: bigint;
  /** Backpressure: when a network's settlement falls behind, new payments are turned away before anything is done. */
  admission?: AdmissionLimits;
  /** Bans and hourly gas budgets for settlements that revert on chain after passing simulation (see `revert-budget.ts`). */
  revertBudget?: RevertBudgetLimits;
  /**
   * Whether a payer may have in flight only what its token balance covers (read once per block, reserved per
   * payment; see `fair-admission.ts`). Default: on.
   */
  reserveBalances?: boolean;
  log: Logger;
  metrics: EngineMetrics;
  clockMs?: () => number;
  /** This node's name in a cluster: its payments carry it, and it resumes on start only its own (alone: every one). */
  node?: string;
  /**
   * The networks where the x402 `batch-settlement` contracts stand at their canonical addresses (read at start): its
   * deposits are settled and its vouchers verified there only. None: the scheme is not served.
   */
  batchSettlementNetworks?: ReadonlySet<string>;
}

export type EngineMetrics = Pick<Metrics, 'verification' | 'watchActor' | 'settlement' | 'revertedSettlement' | 'revertRefusal'> & Partial<Pick<Metrics, 'paymentShed' | 'channelDeposit'>>;

/** Unless configured: 128 payments queued per network, the oldest for at most 500 ms, 64 unmined transactions per relayer. */
export const DEFAULT_ADMISSION: AdmissionLimits = { maxQueued: 128, maxWaitMs: 500, maxTxsPerRelayer: 64 };

/** How many blocks below the head are searched for a consuming transaction, unless configured. */
export const DEFAULT_CONSUMED_LOOKBACK_BLOCKS = 2000n;
