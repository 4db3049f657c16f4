import { resolve } from 'node:path';
import { privateKeyToAccount, type LocalAccount } from 'viem/accounts';
import { BlockWatcher } from '../tx/block-watcher.ts';
import type { SendingChain } from '../tx/sending-chain.ts';
import { publicClientFor } from '../chain/clients.ts';
import { knownContracts } from '../chain/known-addresses.ts';
import type { NetworkRegistry } from '../chain/networks.ts';
import { ConfigError, envBool, envInt, envString } from '../config/env.ts';
import type { Logger } from '../log/logger.ts';
import type { Membership } from '../cluster/membership.ts';
import { machineSeries } from '../metrics/machine-series.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { SHED_REASONS } from '../ports/settlement.ts';
import type { Store } from '../store/open-store.ts';
import { storeConfigFromEnv, type StoreConfig } from '../store/store-config.ts';
import type { PriceFloorSource } from '../policy/price-floor.ts';
import { SETTLEMENT_REASONS } from '../verify/reasons.ts';
import { SignatureVerifier } from '../verify/signature/pool.ts';
import { ChainInspector } from './chain-inspector.ts';
import { paymentMachine } from './payment-machine.ts';
import { RelayerPool } from '../tx/relayer-pool.ts';
import { sleep } from '../tx/courier.ts';
import { guardUntil, REORG_OUTCOMES, ReorgGuard, reorgChainOf, type WatchedTx } from '../tx/reorg-guard.ts';
import type { AdmissionLimits } from './settlement-admission.ts';
import { DEFAULT_ADMISSION, SettlementEngine } from './settlement-engine.ts';
import { DEFAULT_REVERT_BUDGET, REFUSAL_KINDS, type RevertBudgetLimits } from './revert-budget.ts';
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS } from '../chain/canonical.ts';

export interface EngineConfig {
  dataDir: string;
  /** LMDB in `dataDir`, or PostgreSQL (`GATE402_STORE_URL`). */
  store: StoreConfig;
  confirmDeadlineMs: number;
  pollMs: number;
  rpcTimeoutMs: number;
  simulateOnVerify: boolean;
  signatureThreads: number;
  /** How often relayer gas balances are read; a relayer below the minimum takes no new work and is logged. */
  relayerWatchMs: number;
  relayerMinBalanceWei: bigint;
  /** Settlement batching: the most payments per transaction, and how long the first waits for others (1 or 0: off). */
  batchMax: number;
  batchWindowMs: number;
  batchEager: boolean;
  /** How many blocks below the head are searched for the transaction that consumed a failed settlement's authorization. */
  consumedLookbackBlocks: number;
  /** Backpressure: new payments of a network are turned away (503, nothing charged) while its settlement is behind. */
  admission: AdmissionLimits;
  /** Bans and hourly gas budgets for settlements that revert on chain after passing simulation (contract payers). */
  revertBudget: RevertBudgetLimits;
  /** A payer may have in flight only what its token balance covers (see `fair-admission.ts`). */
  reserveBalances: boolean;
  /** Blocks after which a mined transaction is final and no longer watched for reorgs, and how often the head is checked. */
  reorgDepth: number;
  reorgCheckMs: number;
  /** Relayer keys; required unless the caller gives default relayers (the devnet's). */
  relayerKeys: `0x${string}`[];
}

export function engineConfigFromEnv(env: NodeJS.ProcessEnv = process.env): EngineConfig {
  const keys = envString(env, 'GATE402_RELAYER_KEYS', '')
    .split(',')
    .map((k) => k.trim())
    .filter(Boolean);
  for (const k of keys) if (!/^0x[0-9a-fA-F]{64}$/.test(k)) throw new ConfigError('GATE402_RELAYER_KEYS must be 0x-prefixed 32-byte hex keys separated by commas');
  const dataDir = resolve(envString(env, 'GATE402_DATA_DIR', 'var/data'));
  return {
    dataDir,
    store: storeConfigFromEnv(env, dataDir),
    confirmDeadlineMs: envInt(env, 'GATE402_CONFIRM_DEADLINE_MS', 20_000, { min: 100, max: 600_000 }),
    pollMs: envInt(env, 'GATE402_RECEIPT_POLL_MS', 200, { min: 10, max: 60_000 }),
    rpcTimeoutMs: envInt(env, 'GATE402_RPC_TIMEOUT_MS', 10_000, { min: 100, max: 120_000 }),
    simulateOnVerify: envBool(env, 'GATE402_SIMULATE_ON_VERIFY', true),
    signatureThreads: envInt(env, 'GATE402_SIGNATURE_THREADS', 2, { min: 0, max: 64 }),
    relayerWatchMs: envInt(env, 'GATE402_RELAYER_WATCH_MS', 30_000, { min: 1000, max: 3_600_000 }),
    relayerMinBalanceWei: BigInt(envInt(env, 'GATE402_RELAYER_MIN_BALANCE_GWEI', 1_000_000, { min: 0 })) * 10n ** 9n,
    relayerKeys: keys as `0x${string}`[],
    batchMax: envInt(env, 'GATE402_BATCH_MAX', 32, { min: 1, max: 256 }),
    batchWindowMs: envInt(env, 'GATE402_BATCH_WINDOW_MS', 10, { min: 0, max: 10_000 }),
    batchEager: envBool(env, 'GATE402_BATCH_EAGER', true),
    consumedLookbackBlocks: envInt(env, 'GATE402_CONSUMED_LOOKBACK_BLOCKS', 2000, { min: 1, max: 1_000_000 }),
    admission: {
      maxQueued: envInt(env, 'GATE402_SETTLE_QUEUE_MAX', DEFAULT_ADMISSION.maxQueued, { min: 1, max: 1_000_000 }),
      maxWaitMs: envInt(env, 'GATE402_SETTLE_QUEUE_WAIT_MS', DEFAULT_ADMISSION.maxWaitMs, { min: 10, max: 600_000 }),
      maxTxsPerRelayer: envInt(env, 'GATE402_SETTLE_RELAYER_TXS_MAX', DEFAULT_ADMISSION.maxTxsPerRelayer, { min: 1, max: 100_000 }),
      ...clientShareFromEnv(env),
    },
    revertBudget: {
      banMs: envInt(env, 'GATE402_REVERT_BAN_SECONDS', DEFAULT_REVERT_BUDGET.banMs / 1000, { min: 0, max: 365 * 24 * 3600 }) * 1000,
      gasPerPayerHour: BigInt(envInt(env, 'GATE402_REVERT_GAS_PER_PAYER_HOUR', Number(DEFAULT_REVERT_BUDGET.gasPerPayerHour), { min: 0, max: 1_000_000_000 })),
      gasPerCodeHour: BigInt(envInt(env, 'GATE402_REVERT_GAS_PER_CODE_HOUR', Number(DEFAULT_REVERT_BUDGET.gasPerCodeHour), { min: 0, max: 1_000_000_000 })),
      gasTotalHour: BigInt(envInt(env, 'GATE402_REVERT_GAS_TOTAL_HOUR', Number(DEFAULT_REVERT_BUDGET.gasTotalHour), { min: 0, max: 10_000_000_000 })),
      trialLeaseMs: DEFAULT_REVERT_BUDGET.trialLeaseMs,
    },
    reserveBalances: envBool(env, 'GATE402_SETTLE_RESERVE_BALANCE', true),
    reorgDepth: envInt(env, 'GATE402_REORG_DEPTH_BLOCKS', 64, { min: 1, max: 100_000 }),
    reorgCheckMs: envInt(env, 'GATE402_REORG_CHECK_MS', 1000, { min: 50, max: 600_000 }),
  };
}

/** `GATE402_SETTLE_CLIENT_SHARE`, when set: one client's share of a network's settlement queue. */
function clientShareFromEnv(env: NodeJS.ProcessEnv): { clientShare?: number } {
  if (env.GATE402_SETTLE_CLIENT_SHARE === undefined || env.GATE402_SETTLE_CLIENT_SHARE === '') return {};
  return { clientShare: envInt(env, 'GATE402_SETTLE_CLIENT_SHARE', 16, { min: 1, max: 1_000_000 }) };
}

export interface RunningEngine {
  engine: SettlementEngine;
  signatures: SignatureVerifier;
  relayers: Map<string, RelayerPool>;
  /** Each chain's reorg guard: whatever else sends on that chain (the stock desk) hands it what it saw mined. */
  reorgs: Map<string, ReorgGuard>;
  /**
   * What else sends on a chain uses: the engine's inspector, relayers (one nonce manager per chain: a claim never
   * races a settlement for a nonce), block watcher and reorg guard; undefined on a network not configured.
   */
  chain(caip2: string): SendingChain | undefined;
  /** Stops the engine, its chain watchers and its worker pool; the store and the cluster are the caller's to close after. */
  close(): Promise<void>;
}

/** What the engine is built from: the composition root opens the store and joins the cluster, and lends them. */
export interface EngineParts {
  networks: NetworkRegistry;
  config: EngineConfig;
  /** The records, opened by the caller (and closed by it, after the engine). */
  store: Store;
  /** The relayers that pay settlement gas ({@link relayerAccountsFor}). */
  relayers: readonly LocalAccount[];
  /**
   * This node's place in its cluster (the store is shared), joined by the caller with this engine's relayer leases
   * before the engine starts: a dead node's payments are taken over through `membership`.
   */
  cluster?: { node: string; membership: Membership };
  /** The live price floor every payment this engine settles must reach (see `policy/price-floor.ts`). */
  floor?: PriceFloorSource;
  log: Logger;
  metrics: Metrics;
}

/** The relayer keys of `config`, else `defaults` (the devnet's, given by the command line on the devnet only). */
export function relayerAccountsFor(config: Pick<EngineConfig, 'relayerKeys'>, defaults: readonly LocalAccount[] = []): LocalAccount[] {
  const accounts: LocalAccount[] = config.relayerKeys.length ? config.relayerKeys.map((k) => privateKeyToAccount(k)) : [...defaults];
  if (!accounts.length) throw new ConfigError('GATE402_RELAYER_KEYS is required off the devnet (the relayers that pay settlement gas)');
  return accounts;
}

/** Wires an engine to its chains, the given store and its worker pool, and resumes what the store left unfinished. */
export async function createEngine(parts: EngineParts): Promise<RunningEngine> {
  const { networks, config, store, log, metrics } = parts;
  const accounts = [...parts.relayers];
  if (!accounts.length) throw new ConfigError('the engine needs at least one relayer');
  const caip2s = networks.all().map((n) => n.caip2);
  metrics.declareRelayerMinBalance(config.relayerMinBalanceWei);
  metrics.declareMachine('payment', paymentMachine);
  metrics.declareSettlements(caip2s, machineSeries(paymentMachine).finals);
  metrics.declareShedding(caip2s, SHED_REASONS);
  metrics.declareChannelDeposits(caip2s);
  metrics.declareRevertRefusals(REFUSAL_KINDS);
  // Every reason the engine can answer with: the verifications series start at zero with each.
  metrics.declareVerifications(SETTLEMENT_REASONS);
  const signatures = new SignatureVerifier({ threads: config.signatureThreads });
  const inspectors = new Map<string, ChainInspector>();
  const relayers = new Map<string, RelayerPool>();
  const pick = <T>(map: Map<string, T>, caip2: string): T => {
    const v = map.get(caip2);
    if (!v) throw new Error(`network ${caip2} is not configured`);
    return v;
  };
  const watchers = new Map<string, BlockWatcher>();
  const guards = new Map<string, ReorgGuard>();
  const reorgWatch = store.collection<WatchedTx>('reorg-watch');
  metrics.declareReorgOutcomes(caip2s, REORG_OUTCOMES);
  for (const n of networks.all()) {
    const client = publicClientFor(n.chainId, n.rpcUrl, { timeoutMs: config.rpcTimeoutMs, pollingIntervalMs: config.pollMs, observe: metrics.rpcObserver(n.caip2) });
    inspectors.set(n.caip2, new ChainInspector(client));
    relayers.set(n.caip2, new RelayerPool({ chainId: n.chainId, client, accounts, minBalanceWei: config.relayerMinBalanceWei }));
    watchers.set(n.caip2, new BlockWatcher({ client, pollMs: config.pollMs, timeoutMs: config.rpcTimeoutMs, log: log.child({ network: n.caip2 }) }));
    const chain = reorgChainOf(client, pick(relayers, n.caip2));
    guards.set(
      n.caip2,
      new ReorgGuard({
        chainId: n.chainId,
        chain,
        watched: reorgWatch,
        depth: config.reorgDepth,
        ...(parts.cluster ? { node: parts.cluster.node } : {}),
        log: log.child({ network: n.caip2 }),
        onOutcome: (o) => metrics.reorgedTransaction(n.caip2, o),
      }),
    );
  }
  const batchSettlementNetworks = await channelContractNetworks(inspectors, log);
  const engine = new SettlementEngine({
    networks,
    batchSettlementNetworks,
    store,
    signatures,
    inspector: (caip2) => pick(inspectors, caip2),
    relayers: (caip2) => pick(relayers, caip2),
    watcher: (caip2) => pick(watchers, caip2),
    reorgs: (caip2) => guards.get(caip2),
    simulateFrom: (caip2) => pick(relayers, caip2).nextSender(),
    // Never paid: our own relayers and every contract the networks name (a payment there only burns our gas).
    policy: { refusedPayees: new Set([...knownContracts(networks), ...accounts.map((a) => a.address.toLowerCase())]), minAmount: 1n, ...(parts.floor ? { floor: parts.floor } : {}) },
    now: () => BigInt(Math.floor(Date.now() / 1000)),
    confirmDeadlineMs: config.confirmDeadlineMs,
    pollMs: config.pollMs,
    simulateOnVerify: config.simulateOnVerify,
    batch: { maxSize: config.batchMax, windowMs: config.batchWindowMs, eager: config.batchEager },
    consumedLookbackBlocks: BigInt(config.consumedLookbackBlocks),
    admission: config.admission,
    revertBudget: config.revertBudget,
    reserveBalances: config.reserveBalances,
    log,
    metrics,
    ...(parts.cluster ? { node: parts.cluster.node } : {}),
  });
  metrics.watchPendingPayments(() => engine.inFlight);
  metrics.watchRelayers(() => [...relayers].flatMap(([network, pool]) => pool.status().map((r) => ({ network, address: r.address, balanceWei: r.balance, inFlight: r.inFlight }))));
  metrics.watchWorkerPool('signatures', () => {
    const s = signatures.stats;
    return { queued: s.pending, busy: s.inFlight, threads: s.threads };
  });
  const guarding = new AbortController();
  const stopParts = async () => {
    guarding.abort();
    for (const w of watchers.values()) w.stop();
    await signatures.close();
  };
  try {
    await engine.start();
  } catch (error) {
    await stopParts();
    throw error;
  }
  for (const [caip2, guard] of guards) void guardUntil(guard, config.reorgCheckMs, guarding.signal, log.child({ network: caip2 }), sleep);
  const membership = parts.cluster?.membership;
  membership?.takeOverWith(async (node) => {
    // What it had mined and watched first (its payments may all be final, and their lease given back at once).
    for (const [caip2, guard] of guards) {
      const count = await guard.adopt(node);
      if (count) log.warn("watching a dead node's mined transactions for reorgs", { node, network: caip2, count });
    }
    await engine.adopt(node, () => void membership.finished(node).catch((error: unknown) => log.warn("could not give a dead node's lease back; it expires", { node, error })));
  });
  const watch = setInterval(() => {
    for (const [caip2, pool] of relayers) {
      pool.refreshBalances().then(
        (rows) => {
          for (const r of rows) {
            if (r.balance < config.relayerMinBalanceWei) log.warn('relayer gas is low: it takes no new settlements', { network: caip2, relayer: r.address, balanceWei: r.balance });
          }
        },
        (err: unknown) => log.warn('relayer balance check failed', { network: caip2, error: err }),
      );
    }
  }, config.relayerWatchMs);
  watch.unref();
  return {
    engine,
    signatures,
    relayers,
    reorgs: guards,
    chain(caip2) {
      const inspector = inspectors.get(caip2);
      const pool = relayers.get(caip2);
      const watcher = watchers.get(caip2);
      if (!inspector || !pool || !watcher) return undefined;
      return { client: inspector.client, relayers: pool, watcher, reorgs: guards.get(caip2), pollMs: config.pollMs };
    },
    async close() {
      clearInterval(watch);
      // The store stays open after: the caller closes the cluster (the node's lease expires, for another node to
      // finish what was left in flight) and then the store.
      await engine.stop();
      await stopParts();
    },
  };
}

/**
 * The networks where the x402 `batch-settlement` contracts stand at their canonical addresses (the settlement
 * contract and a deposit collector), read once at start: the scheme is listed and served there only. A chain that
 * cannot be read is left out, and said so.
 */
async function channelContractNetworks(inspectors: Map<string, ChainInspector>, log: Logger): Promise<Set<string>> {
  const found = new Set<string>();
  await Promise.all(
    [...inspectors].map(async ([caip2, inspector]) => {
      try {
        const [settlement, erc3009, permit2] = await Promise.all([BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS].map((a) => inspector.hasCode(a)));
        if (settlement && (erc3009 || permit2)) found.add(caip2);
      } catch (error) {
        log.warn('could not read whether the batch-settlement contracts are deployed: the scheme is not served there', { network: caip2, error });
      }
    }),
  );
  return found;
}
