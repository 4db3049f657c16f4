/**
 * Payment channels as the gateway runs them: their settings (the receiver authorizer key and the withdraw delay) and the paywall's part made from
 * them (the channel records in the Store, the chain reader, the offers' terms).
 */
import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { NetworkRegistry } from '../../chain/networks.ts';
import { ChannelLedger, CHANNEL_RECORDS } from '../../channels/channel-ledger.ts';
import { rpcChannelReader } from '../../channels/chain-channel.ts';
import { budgetedChannelReader } from '../../channels/chain-read-budget.ts';
import { ConfigError, envInt, envString } from '../../config/env.ts';
import { MAX_WITHDRAW_DELAY, MIN_WITHDRAW_DELAY } from '../../schemes/batch-settlement/domain.ts';
import type { Store } from '../../store/store.ts';
import type { ChannelOfferTerms } from './channel-offers.ts';
import type { PaywallChannels } from './channel-paid.ts';
import { MAX_TIMEOUT_SECONDS } from './offers.ts';
import type { BootLiveness } from './served-claims.ts';

export interface ChannelConfig {
  /** Signs the receiver's claims and refunds; its address is every channel's `receiverAuthorizer`. None: no channels. */
  authorizerKey: Hex | undefined;
  /** Seconds a payer's withdrawal waits (every claim must land within it). */
  withdrawDelay: number;
  /** Chain reads of channels per second, all channels together (see `channels/chain-read-budget.ts`). */
  chainReadsPerSecond: number;
}

/** A channel is read on chain at most this often; asks in between share its last read. */
const CHANNEL_READ_INTERVAL_MS = 2_000;

/**
 * `devnetKey`: the devnet's authorizer, given only on the devnet. Off the devnet, channels are refused for now:
 * nothing claims accepted vouchers on chain yet (the receiver's claim and sweep actors are still to come), so a
 * merchant would serve requests whose vouchers are never paid out, and a payer's withdrawal would take them back.
 */
export function channelConfigFromEnv(env: NodeJS.ProcessEnv, devnetKey: Hex | undefined): ChannelConfig {
  const key = envString(env, 'GATE402_CHANNEL_AUTHORIZER_KEY', devnetKey ?? '');
  if (key !== '' && devnetKey === undefined) {
    throw new ConfigError(
      'GATE402_CHANNEL_AUTHORIZER_KEY: payment channels (batch-settlement) run on the devnet only in this version: nothing claims accepted vouchers on chain yet, so a merchant would serve requests it is never paid for. Unset it; routes then offer exact only',
    );
  }
  if (key !== '' && !/^0x[0-9a-fA-F]{64}$/.test(key)) throw new ConfigError('GATE402_CHANNEL_AUTHORIZER_KEY must be a 0x-prefixed 32-byte private key (the receiver authorizer of payment channels)');
  return {
    authorizerKey: key === '' ? undefined : (key as Hex),
    withdrawDelay: envInt(env, 'GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS', 86_400, { min: MIN_WITHDRAW_DELAY, max: MAX_WITHDRAW_DELAY }),
    chainReadsPerSecond: envInt(env, 'GATE402_CHANNEL_CHAIN_READS_PER_SECOND', 20, { min: 1, max: 10_000 }),
  };
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
    ledger: new ChannelLedger(parts.store.claims(CHANNEL_RECORDS)),
    readChannel: budgetedChannelReader(
      rpcChannelReader((network) => parts.networks.find(network)?.rpcUrl),
      { perSecond: config.chainReadsPerSecond, burst: Math.max(10, 2 * config.chainReadsPerSecond), perChannelMs: CHANNEL_READ_INTERVAL_MS },
    ),
    ...(parts.live ? { live: parts.live } : {}),
  };
}
