/**
 * Payment channels as the gateway runs them: the paywall's part made from their settings (`channel-settings.ts`: the
 * channel records in the Store, the chain reader, the offers' terms) and the claim and refund actors.
 */
import { privateKeyToAccount } from 'viem/accounts';
import { chainIdOf } from '../../chain/canonical.ts';
import type { NetworkRegistry } from '../../chain/networks.ts';
import { ChannelLedger, CHANNEL_INDEX, CHANNEL_RECORDS } from '../../channels/channel-ledger.ts';
import { rpcChannelReader } from '../../channels/chain-channel.ts';
import { budgetedChannelReader } from '../../channels/chain-read-budget.ts';
import type { ClaimRecord } from '../../channels/claim-machine.ts';
import type { ClaimChain } from '../../channels/claim-steps.ts';
import { ChannelClaimer } from '../../channels/claimer.ts';
import type { ChannelConfig } from './channel-settings.ts';
import { CLAIMER_WORD, ClaimRole, type ClaimerWord, type ClaimFence, type Claiming } from '../../channels/claim-lease.ts';
import { ChannelRefunds } from '../../channels/refund-desk.ts';
import type { RefundRecord } from '../../channels/refund-machine.ts';
import type { RoleLeases } from '../../cluster/role-lease.ts';
import { guardedCourier } from '../../tx/guarded-courier.ts';
import { courierOver, type SendingChain } from '../../tx/sending-chain.ts';
import type { Logger } from '../../log/logger.ts';
import type { Metrics } from '../../metrics/metrics.ts';
import type { Store } from '../../store/store.ts';
import type { ChannelOfferTerms } from './channel-offers.ts';
import type { PaywallChannels } from './channel-paid.ts';
import type { PaywallRefunds } from './channel-refund.ts';
import { MAX_TIMEOUT_SECONDS } from './offers.ts';
import { thisBootOnly, type BootLiveness } from './served-claims.ts';

export { channelConfigFromEnv, type ChannelConfig } from './channel-settings.ts';

/** A channel is read on chain at most this often; asks in between share its last read. */
const CHANNEL_READ_INTERVAL_MS = 2_000;

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
    maxChannelExposure: config.claims.safety.maxChannelExposure,
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
      blocked: (network) => role.blocked(network),
      exposed: (network, amount) => role.exposed(network, amount),
      claimSoon: (network) => role.claimSoon(network),
      chainAheadMs: (network) => role.chainAheadMs(network),
      stop: async () => {
        await role.stop();
        await cluster.close();
      },
    },
    refunds: refundsPart,
  };
}

/** What the paywall asks of the claimer before and after it takes a voucher (see `PaywallChannels`). */
export function claimPath(claimer: Claiming): Pick<PaywallChannels, 'blocked' | 'exposed' | 'claimSoon' | 'chainAheadMs'> {
  return {
    blocked: (network) => (claimer.blocked ? claimer.blocked(network) : claimer.claiming(network) ? undefined : 'claims_behind'),
    exposed: (network, amount) => claimer.exposed?.(network, amount),
    claimSoon: (network) => claimer.claimSoon?.(network),
    chainAheadMs: (network) => claimer.chainAheadMs?.(network) ?? 0,
  };
}
