import { createHmac } from 'node:crypto';
import { privateKeyToAccount, type LocalAccount } from 'viem/accounts';
import { CAIP2, PERMIT2_ADDRESS } from '../chain/canonical.ts';
import { publicClientFor } from '../chain/clients.ts';
import type { NetworkRegistry } from '../chain/networks.ts';
import { ConfigError, envBool, envInt, envString } from '../config/env.ts';
import { RelayerPool } from '../tx/relayer-pool.ts';
import { sleep } from '../tx/courier.ts';
import { guardUntil, ReorgGuard, reorgChainOf, type ReorgOutcome, type WatchedTx } from '../tx/reorg-guard.ts';
import { ipRateLimited } from '../http/ip-rate-limited.ts';
import { TokenBucketLimiter } from '../http/rate-limit.ts';
import type { HttpHandler } from '../http/server.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { Settlement } from '../ports/settlement.ts';
import type { UpstreamPort } from '../ports/upstream.ts';
import { refusal } from '../protocol/result.ts';
import type { Store } from '../store/open-store.ts';
import { GasSponsor, SPONSOR_REFUSAL_CODES, sponsorBudgetFromEnv, type Sponsorship } from './gas-sponsor.ts';
import { stockHandlers } from './http.ts';
import { StockMarket } from './market.ts';
import { DeskLease, type DeskLeases } from './desk-lease.ts';
import { StockDesk } from './order-desk.ts';
import { orderMachine } from './order-machine.ts';
import { FINAL_ORDER_STATES, REFUND_REASONS } from './order-states.ts';
import { stockData } from './stock-data.ts';

export interface StockConfig {
  /** Off: the gateway serves no stock API (the desk key is not used). */
  enabled: boolean;
  /** The desk's key; on the devnet, the manifest's stock desk when none is given. */
  deskKey?: `0x${string}`;
  slippageBps: number;
  orderWaitMs: number;
  swapDeadlineSeconds: number;
  refundRetryMs: number;
  rpcTimeoutMs: number;
  pollMs: number;
  sponsorRate: { capacity: number; refillPerSecond: number };
  /** Native coin (wei) the gas sponsorships of the last hour may add up to. */
  sponsorBudgetWei: bigint;
  /** Blocks a mined swap, refund or gas transfer is watched for reorgs, and how often (see `tx/reorg-guard.ts`). */
  reorgDepth: number;
  reorgCheckMs: number;
}

export function stockConfigFromEnv(env: NodeJS.ProcessEnv): StockConfig {
  const key = envString(env, 'GATE402_STOCK_DESK_KEY', '');
  if (key && !/^0x[0-9a-fA-F]{64}$/.test(key)) throw new ConfigError('GATE402_STOCK_DESK_KEY must be a 0x-prefixed 32-byte private key');
  return {
    enabled: envBool(env, 'GATE402_STOCK_ENABLED', true),
    ...(key ? { deskKey: key as `0x${string}` } : {}),
    slippageBps: envInt(env, 'GATE402_STOCK_SLIPPAGE_BPS', 100, { min: 1, max: 5000 }),
    orderWaitMs: envInt(env, 'GATE402_STOCK_ORDER_WAIT_MS', 60_000, { min: 100, max: 600_000 }),
    swapDeadlineSeconds: envInt(env, 'GATE402_STOCK_SWAP_DEADLINE_SECONDS', 120, { min: 10, max: 3600 }),
    refundRetryMs: envInt(env, 'GATE402_STOCK_REFUND_RETRY_MS', 15_000, { min: 100, max: 3_600_000 }),
    rpcTimeoutMs: envInt(env, 'GATE402_RPC_TIMEOUT_MS', 10_000, { min: 100, max: 120_000 }),
    pollMs: envInt(env, 'GATE402_RECEIPT_POLL_MS', 200, { min: 10, max: 60_000 }),
    sponsorRate: {
      capacity: envInt(env, 'GATE402_SPONSOR_RATE_CAPACITY', 5, { min: 1, max: 100_000 }),
      refillPerSecond: 1 / envInt(env, 'GATE402_SPONSOR_RATE_SECONDS_PER_TOKEN', 60, { min: 1, max: 86_400 }),
    },
    sponsorBudgetWei: sponsorBudgetFromEnv(env),
    reorgDepth: envInt(env, 'GATE402_REORG_DEPTH_BLOCKS', 64, { min: 1, max: 100_000 }),
    reorgCheckMs: envInt(env, 'GATE402_REORG_CHECK_MS', 1000, { min: 50, max: 600_000 }),
  };
}

export interface RunningStockDesk {
  desk: StockDesk;
  routes: Array<{ method: string; path: string; handler: HttpHandler }>;
  /** The `stock-data` upstream: the built-in `chain-stocks` merchant, served from this desk's market. */
  data: UpstreamPort;
  close(): Promise<void>;
}

export interface StockParts {
  networks: NetworkRegistry;
  store: Store;
  /** What settles buyers' payments (the settlement port the composition root picks: the engine or remote facilitators). */
  settlement: Settlement;
  /** The gateway's challenge key: the quote key is derived from it. */
  mppKey: Uint8Array;
  baseUrl: string;
  /** Used when no desk key is configured (the devnet's). */
  defaultDeskAccount?: LocalAccount;
  log: Logger;
  metrics?: Metrics;
  /** In a cluster (a shared store): the desk runs on the node holding its lease, the others hand buys to it. */
  cluster?: DeskCluster;
}

/** What the desk needs of the cluster: its lease, and a word to the desk's node when a buy is placed elsewhere. */
export interface DeskCluster {
  /** This node's leases, on a connection pool of their own (see `desk-lease.ts`). */
  leases: DeskLeases;
  /** The desk lease's name for the desk's address. */
  leaseName(address: string): string;
  termMs: number;
  /** Tells every node (NOTIFY) that `payload` of `channel` changed. */
  notify(channel: string, payload: string): Promise<void>;
  /** Hears `channel` (LISTEN); `resync` when notifications may have been missed. */
  subscribe(channel: string, subscriber: { changed(payload: string): void; resync(): void }): Promise<void>;
  /** The desk lease was lost: this node must stop signing with the desk key. */
  onLost(why: string): void;
  /** Closes what the leases run on (after the lease is given back). */
  close(): Promise<void>;
}

/** The channel on which a node tells the desk's node that an order waits in the inbox (the payload: its id). */
export const STOCK_ORDER_CHANNEL = 'gate402_stock_orders';
const ORDER_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The stock purchase API on the stock chain, or undefined when that chain lists no stocks. */
export async function createStockDesk(parts: StockParts, config: StockConfig): Promise<RunningStockDesk | undefined> {
  if (!config.enabled) {
    parts.log.info('stock desk off: GATE402_STOCK_ENABLED is false');
    await parts.cluster?.close();
    return undefined;
  }
  const network = parts.networks.find(CAIP2.stockChain);
  if (!network?.stocks?.length || !network.uniswap) {
    parts.log.info(`stock desk off: no stocks with a Uniswap deployment are configured on ${CAIP2.stockChain}`, { network: CAIP2.stockChain, configured: Boolean(network) });
    await parts.cluster?.close();
    return undefined;
  }
  const account = config.deskKey ? privateKeyToAccount(config.deskKey) : parts.defaultDeskAccount;
  if (!account) throw new ConfigError('GATE402_STOCK_DESK_KEY is required to sell stocks');
  const client = publicClientFor(network.chainId, network.rpcUrl, { timeoutMs: config.rpcTimeoutMs, pollingIntervalMs: config.pollMs });
  const pool = new RelayerPool({ chainId: network.chainId, client, accounts: [account] });
  // Mined swaps, refunds and gas transfers are watched until final; a reorg that drops one has it sent again.
  const reorgs = new ReorgGuard({
    chainId: network.chainId,
    chain: reorgChainOf(client, pool),
    watched: parts.store.collection<WatchedTx>('stock-reorg-watch'),
    depth: config.reorgDepth,
    log: parts.log,
    ...(parts.metrics ? { onOutcome: (o: ReorgOutcome) => parts.metrics?.reorgedTransaction(network.caip2, o) } : {}),
  });
  const market = new StockMarket(network, client);
  const log = parts.log;
  parts.metrics?.declareMachine('order', orderMachine);
  parts.metrics?.declareStock({
    symbols: market.stocks.map((s) => s.symbol),
    outcomes: [...FINAL_ORDER_STATES],
    refundReasons: REFUND_REASONS,
    sponsorshipOutcomes: ['sent', ...SPONSOR_REFUSAL_CODES],
  });
  const cluster = parts.cluster;
  const desk = new StockDesk({
    market,
    pool,
    reorgs,
    store: parts.store,
    settle: (request) => parts.settlement.settle(request),
    pollMs: config.pollMs,
    refundRetryMs: config.refundRetryMs,
    swapDeadlineSeconds: config.swapDeadlineSeconds,
    log,
    ...(parts.metrics ? { metrics: parts.metrics } : {}),
    ...(cluster ? { handOff: (id: string) => cluster.notify(STOCK_ORDER_CHANNEL, id) } : {}),
  });
  const abort = new AbortController();
  const sponsor = new GasSponsor({
    market,
    courier: { pool, client, pollMs: config.pollMs, log, reorgs },
    permit2: network.permit2 ?? PERMIT2_ADDRESS,
    claims: parts.store.claims('gas-sponsored'),
    records: parts.store.collection<Sponsorship>('gas-sponsorships'),
    log,
    signal: abort.signal,
    hourlyBudgetWei: config.sponsorBudgetWei,
    ...(parts.metrics ? { metrics: parts.metrics } : {}),
  });
  // Starts the desk here: the store's unfinished orders and in-flight sponsorships resume, then new orders run.
  const activate = async () => {
    const left = await sponsor.unfinished();
    await desk.start(left.map((s) => s.txs));
    sponsor.resume(left);
    void guardUntil(reorgs, config.reorgCheckMs, abort.signal, log, sleep);
    log.info('stock desk running on this node', { desk: desk.address });
  };
  let lease: DeskLease | undefined;
  if (!cluster) await activate();
  else {
    await cluster.subscribe(STOCK_ORDER_CHANNEL, {
      changed: (id) => {
        if (ORDER_ID.test(id)) void desk.pickUp(id);
      },
      resync: () => void desk.sweepInbox().catch(() => {}),
    });
    lease = new DeskLease({
      leases: cluster.leases,
      name: cluster.leaseName(desk.address),
      termMs: cluster.termMs,
      activate,
      renewed: () => desk.sweepInbox(),
      onLost: (why) => {
        void desk.stop();
        cluster.onLost(why);
      },
      log,
    });
    // A desk whose lease may be gone (past most of a term since its last renewal, or lost) signs and sends nothing.
    const held = lease;
    pool.guardWith(() => held.signing());
    // The first node to start takes the lease at once, and is ready once its desk runs; the others stand by.
    await lease.start();
    await lease.settled();
    if (!lease.active) log.info('stock desk standing by: another node holds the desk lease; buys placed here are run there', { desk: desk.address });
  }
  // Gas is sent by the node running the desk; another answers that it cannot send it now.
  const sponsorHere = {
    sponsor: (address: Parameters<GasSponsor['sponsor']>[0]) =>
      desk.running
        ? sponsor.sponsor(address)
        : Promise.resolve(refusal('sponsor_unavailable', 'gas sponsorship is sent by the node running the stock desk, which is not this one right now; nothing was sent, try again shortly', 503)),
  };
  const h = stockHandlers({
    desk,
    sponsor: sponsorHere,
    quoteKey: createHmac('sha256', parts.mppKey).update('gate402 stock quote').digest(),
    slippageBps: config.slippageBps,
    baseUrl: parts.baseUrl,
    orderWaitMs: config.orderWaitMs,
    now: Date.now,
  });
  log.info('stock desk ready', { desk: desk.address, stocks: market.stocks.length, slippageBps: config.slippageBps });
  return {
    desk,
    routes: [
      { method: 'GET', path: '/api/stock/list', handler: h.list },
      { method: 'GET', path: '/api/stock/quote', handler: h.quote },
      { method: 'POST', path: '/api/stock/buy', handler: h.buy },
      { method: 'GET', path: '/api/stock/order/:id', handler: h.order },
      { method: 'GET', path: '/api/stock/orders', handler: h.orders },
      { method: 'POST', path: '/api/gas/sponsor', handler: ipRateLimited(h.sponsor, new TokenBucketLimiter(config.sponsorRate), 'sponsorship requests') },
    ],
    data: stockData({ market, slippageBps: config.slippageBps, now: Date.now }),
    async close() {
      await lease?.stop();
      abort.abort();
      await desk.stop();
      // Given back once nothing more is signed here: a standby takes it at once and finishes what was in flight.
      await lease?.release();
      await cluster?.close();
    },
  };
}
