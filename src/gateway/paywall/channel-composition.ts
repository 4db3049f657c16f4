/**
 * Payment channels as the gateway runs them: their settings (the receiver authorizer key and the withdraw delay) and the paywall's part made from
 * them (the channel records in the Store, the chain reader, the offers' terms).
 */
import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { chainIdOf } from '../../chain/canonical.ts';
import type { NetworkRegistry } from '../../chain/networks.ts';
import { ChannelLedger, CHANNEL_INDEX, CHANNEL_RECORDS } from '../../channels/channel-ledger.ts';
import { rpcChannelReader } from '../../channels/chain-channel.ts';
import { budgetedChannelReader } from '../../channels/chain-read-budget.ts';
import type { ClaimRecord } from '../../channels/claim-machine.ts';
import type { ClaimChain } from '../../channels/claim-steps.ts';
import { ChannelClaimer, type ClaimerSettings } from '../../channels/claimer.ts';
import { CLAIMER_WORD, ClaimRole, type ClaimerWord, type ClaimFence, type Claiming } from '../../channels/claim-lease.ts';
import { ChannelRefunds } from '../../channels/refund-desk.ts';
import type { RefundRecord } from '../../channels/refund-machine.ts';
import type { RoleLeases } from '../../cluster/role-lease.ts';
import { guardedCourier } from '../../tx/guarded-courier.ts';
import { ConfigError, envInt, envString } from '../../config/env.ts';
import { courierOver, type SendingChain } from '../../tx/sending-chain.ts';
import type { Logger } from '../../log/logger.ts';
import type { Metrics } from '../../metrics/metrics.ts';
import { MAX_WITHDRAW_DELAY, MIN_WITHDRAW_DELAY } from '../../schemes/batch-settlement/domain.ts';
import type { Store } from '../../store/store.ts';
import type { ChannelOfferTerms } from './channel-offers.ts';
import type { PaywallChannels } from './channel-paid.ts';
import type { PaywallRefunds } from './channel-refund.ts';
import { MAX_TIMEOUT_SECONDS } from './offers.ts';
import { thisBootOnly, type BootLiveness } from './served-claims.ts';

export interface ChannelConfig {
  /** Signs the receiver's claims and refunds; its address is every channel's `receiverAuthorizer`. None: no channels. */
  authorizerKey: Hex | undefined;
  /** Seconds a payer's withdrawal waits (every claim must land within it). */
  withdrawDelay: number;
  /** When accepted vouchers are claimed and swept (see `channels/claimer.ts`). */
  claims: ClaimerSettings;
  /** Seconds before a pending withdrawal can finalize from which its channel takes no more vouchers. */
  withdrawMarginSeconds: number;
  /** Chain reads of channels per second, all channels together (see `channels/chain-read-budget.ts`). */
  chainReadsPerSecond: number;
  /** The smallest partial refund, in the token's smallest units (a full refund of what is left is always taken). */
  minRefund: bigint;
  /** How long a refund request waits for its transaction to mine before it is answered 202. */
  refundWaitMs: number;
}

/** A channel is read on chain at most this often; asks in between share its last read. */
const CHANNEL_READ_INTERVAL_MS = 2_000;

/**
 * `devnetKey`: the devnet's authorizer, given only on the devnet. Off the devnet, channels are refused for now: a
 * voucher accepted just before a payer's withdrawal margin has only the margin for its claim to land
 * (docs/gateway.md, payment channels, says what is left).
 */
export function channelConfigFromEnv(env: NodeJS.ProcessEnv, devnetKey: Hex | undefined): ChannelConfig {
  const key = envString(env, 'GATE402_CHANNEL_AUTHORIZER_KEY', devnetKey ?? '');
  if (key !== '' && devnetKey === undefined) {
    throw new ConfigError(
      'GATE402_CHANNEL_AUTHORIZER_KEY: payment channels (batch-settlement) run on the devnet only in this version: an accepted voucher is served before it is claimed, and the claims are not yet sized against a payer withdrawing while they fail (docs/gateway.md). Unset it; routes then offer exact only',
    );
  }
  if (key !== '' && !/^0x[0-9a-fA-F]{64}$/.test(key)) throw new ConfigError('GATE402_CHANNEL_AUTHORIZER_KEY must be a 0x-prefixed 32-byte private key (the receiver authorizer of payment channels)');
  const withdrawDelay = envInt(env, 'GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS', 86_400, { min: MIN_WITHDRAW_DELAY, max: MAX_WITHDRAW_DELAY });
  const claims: ClaimerSettings = {
    intervalMs: envInt(env, 'GATE402_CHANNEL_CLAIM_INTERVAL_MS', 15_000, { min: 100, max: 600_000 }),
    exposureThreshold: BigInt(envInt(env, 'GATE402_CHANNEL_CLAIM_EXPOSURE', 1_000_000, { min: 1 })),
    maxAgeMs: envInt(env, 'GATE402_CHANNEL_CLAIM_MAX_AGE_SECONDS', 3600, { min: 1, max: 30 * 86_400 }) * 1000,
    maxRows: envInt(env, 'GATE402_CHANNEL_CLAIM_MAX_ROWS', 50, { min: 1, max: 200 }),
    withdrawLookbackBlocks: envInt(env, 'GATE402_CHANNEL_WITHDRAW_LOOKBACK_BLOCKS', 20_000, { min: 1, max: 10_000_000 }),
  };
  // A pending withdrawal is claimed against at the next round: rounds must come many times within the delay.
  if (claims.intervalMs * 10 > withdrawDelay * 1000) {
    throw new ConfigError('GATE402_CHANNEL_CLAIM_INTERVAL_MS must be at most a tenth of GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS (a withdrawal must meet many claim rounds before it can be finalized)');
  }
  const withdrawMarginSeconds = envInt(env, 'GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS', 300, { min: 1, max: MAX_WITHDRAW_DELAY });
  if (withdrawMarginSeconds * 1000 < claims.intervalMs * 4 || withdrawMarginSeconds >= withdrawDelay) {
    throw new ConfigError(
      'GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS must be below GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS and at least four claim rounds (GATE402_CHANNEL_CLAIM_INTERVAL_MS): the vouchers accepted before it must be claimed within it',
    );
  }
  const chainReadsPerSecond = envInt(env, 'GATE402_CHANNEL_CHAIN_READS_PER_SECOND', 20, { min: 1, max: 10_000 });
  const minRefund = BigInt(envInt(env, 'GATE402_CHANNEL_MIN_REFUND', 10_000, { min: 1 }));
  const refundWaitMs = envInt(env, 'GATE402_CHANNEL_REFUND_WAIT_MS', 30_000, { min: 1_000, max: 300_000 });
  return { authorizerKey: key === '' ? undefined : (key as Hex), withdrawDelay, claims, withdrawMarginSeconds, chainReadsPerSecond, minRefund, refundWaitMs };
}

/** The terms channel offers carry, or undefined when no receiver authorizer is configured. */
export function channelOfferTerms(config: ChannelConfig): ChannelOfferTerms | undefined {
  if (!config.authorizerKey) return undefined;
  return { receiverAuthorizer: privateKeyToAccount(config.authorizerKey).address, withdrawDelay: config.withdrawDelay, maxTimeoutSeconds: MAX_TIMEOUT_SECONDS };
}

/** The paywall's channel part, or undefined when no receiver authorizer is configured (routes then offer `exact` only). */
export function paywallChannels(config: ChannelConfig, parts: { store: Store; networks: NetworkRegistry; live?: BootLiveness }): PaywallChannels | undefined {
  const offers = channelOfferTerms(config);
  if (!offers) return undefined;
  return {
    offers,
    ledger: new ChannelLedger(parts.store.claims(CHANNEL_RECORDS), parts.store.collection<string>(CHANNEL_INDEX)),
    readChannel: budgetedChannelReader(
      rpcChannelReader((network) => parts.networks.find(network)?.rpcUrl),
      { perSecond: config.chainReadsPerSecond, burst: Math.max(10, 2 * config.chainReadsPerSecond), perChannelMs: CHANNEL_READ_INTERVAL_MS },
    ),
    withdrawMarginSeconds: config.withdrawMarginSeconds,
    ...(parts.live ? { live: parts.live } : {}),
  };
}

/** What the claimer needs of a cluster: the claim lease is taken and kept through this node's leases (`channels/claim-lease.ts`). */
export interface ClaimCluster {
  leases: RoleLeases;
  termMs: number;
  node: string;
  /** Closes what the lease runs on (after it is given back). */
  close(): Promise<void>;
}

/**
 * The claim and refund actors of the paywall's channels, started: on every configured network the engine has chain
 * parts for, with the engine's relayers (one nonce manager per chain) and the receiver authorizer signing each claim.
 * Claims: in a cluster (`parts.cluster`), on the node holding the claim lease alone, fenced by it; the others stand
 * by. Refunds: on the node a refund request reaches (each refund's record names its boot; a start resumes only the
 * refunds of boots no longer live).
 */
export async function startChannelClaimer(
  config: ChannelConfig,
  channels: PaywallChannels,
  parts: { store: Store; networks: NetworkRegistry; chain(caip2: string): SendingChain | undefined; cluster?: ClaimCluster; log: Logger; metrics: Metrics },
): Promise<{ claimer: Claiming; refunds: PaywallRefunds & { desk: ChannelRefunds } } | undefined> {
  if (!config.authorizerKey) {
    await parts.cluster?.close();
    return undefined;
  }
  const authorizer = privateKeyToAccount(config.authorizerKey);
  const engine = new Map<string, SendingChain>();
  for (const n of parts.networks.all()) {
    const c = parts.chain(n.caip2);
    if (c) engine.set(n.caip2, c);
  }
  const chainsOf = (lease?: ClaimFence): Map<string, ClaimChain> => {
    const chains = new Map<string, ClaimChain>();
    for (const [network, c] of engine) {
      const courier = courierOver(c, parts.log.child({ network }));
      chains.set(network, { network, chainId: chainIdOf(network), authorizer, courier: lease ? guardedCourier(courier, lease.signing) : courier });
    }
    return chains;
  };
  // What claims and refunds share: the records, who simulates, the chain's view.
  const shared = {
    ledger: channels.ledger,
    simulateFrom: (network: string) => (engine.get(network) as SendingChain).relayers.nextSender(),
    // Their own reads, neither shared nor budgeted: a read after a withdrawal event, or a refund's amount, must be of the chain as it is now.
    readChannel: rpcChannelReader((network) => parts.networks.find(network)?.rpcUrl),
    live: channels.live ?? thisBootOnly,
    metrics: parts.metrics,
  };
  const refunds = new ChannelRefunds({
    ...shared,
    chains: chainsOf(),
    records: parts.store.collection<RefundRecord>('channel-refunds'),
    minRefund: config.minRefund,
    log: parts.log.child({ part: 'channel-refunds' }),
  });
  await refunds.start();
  const refundsPart = { desk: refunds, waitMs: config.refundWaitMs, minRefund: config.minRefund };
  const start = async (lease?: ClaimFence): Promise<ChannelClaimer> => {
    const fenced = lease ? { fence: lease.fence } : {};
    const claimer = new ChannelClaimer({
      ...shared,
      chains: chainsOf(lease),
      settings: config.claims,
      records: parts.store.collection<ClaimRecord>('channel-claims', fenced),
      cursors: parts.store.collection<string>('channel-withdraw-scan', fenced),
      log: parts.log,
    });
    await claimer.start();
    return claimer;
  };
  const cluster = parts.cluster;
  if (!cluster) return { claimer: await start(), refunds: refundsPart };
  const role = new ClaimRole({
    leases: cluster.leases,
    termMs: cluster.termMs,
    node: cluster.node,
    networks: [...engine.keys()],
    word: (fence) => parts.store.collection<ClaimerWord>(CLAIMER_WORD, { fence }),
    start,
    log: parts.log,
  });
  await role.start();
  return {
    claimer: {
      claiming: (network) => role.claiming(network),
      stop: async () => {
        await role.stop();
        await cluster.close();
      },
    },
    refunds: refundsPart,
  };
}
