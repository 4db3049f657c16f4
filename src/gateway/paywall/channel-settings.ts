/**
 * Payment channels' settings, from the environment: the receiver authorizer key, the withdraw delay the offers carry,
 * the withdrawal margin, the claim rounds and the claim path's safety (`channels/claim-health.ts`: exposure caps, the
 * relayers' gas headroom, when a claim counts as stalled).
 *
 * A voucher is served before it is paid on chain; what protects it is a claim landing before a payer's withdrawal
 * finalizes. The margin is how long the claim path has for the last voucher accepted before a pending withdrawal's
 * deadline: off the devnet it must be long enough to outlast an outage (at least {@link MIN_MARGIN_OFF_DEVNET}), well
 * below the withdraw delay (at most half: a withdrawal does not close the channel at once), and a stalled claim must be
 * noticed well within it; the relayers' gas must be sized with a headroom of at least 2. Otherwise the start is refused
 * with the reason. The devnet keeps short defaults its tests can reach.
 */
import type { Hex } from 'viem';
import type { ClaimerSettings } from '../../channels/claimer.ts';
import { ConfigError, envInt, envString } from '../../config/env.ts';
import { MAX_WITHDRAW_DELAY, MIN_WITHDRAW_DELAY } from '../../schemes/batch-settlement/domain.ts';

export interface ChannelConfig {
  /** Signs the receiver's claims and refunds; its address is every channel's `receiverAuthorizer`. None: no channels. */
  authorizerKey: Hex | undefined;
  /** Seconds a payer's withdrawal waits (every claim must land within it). */
  withdrawDelay: number;
  /** When accepted vouchers are claimed and swept, and when none is taken (see `channels/claimer.ts`). */
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

/** Off the devnet, the least margin: an outage of the claim path shorter than this loses no accepted voucher. */
export const MIN_MARGIN_OFF_DEVNET = 3600;
/** The margin's default: on the devnet, short enough for its tests; elsewhere a quarter of the default delay. */
const DEVNET_MARGIN = 300;
const MARGIN = 21_600;
const DELAY = 86_400;

/** `devnetKey`: the devnet's authorizer, given only on the devnet (elsewhere the rules above apply). */
export function channelConfigFromEnv(env: NodeJS.ProcessEnv, devnetKey: Hex | undefined): ChannelConfig {
  const devnet = devnetKey !== undefined;
  const key = envString(env, 'GATE402_CHANNEL_AUTHORIZER_KEY', devnetKey ?? '');
  if (key !== '' && !/^0x[0-9a-fA-F]{64}$/.test(key)) throw new ConfigError('GATE402_CHANNEL_AUTHORIZER_KEY must be a 0x-prefixed 32-byte private key (the receiver authorizer of payment channels)');
  const withdrawDelay = envInt(env, 'GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS', DELAY, { min: MIN_WITHDRAW_DELAY, max: MAX_WITHDRAW_DELAY });
  const claims: ClaimerSettings = {
    intervalMs: envInt(env, 'GATE402_CHANNEL_CLAIM_INTERVAL_MS', 15_000, { min: 100, max: 600_000 }),
    exposureThreshold: BigInt(envInt(env, 'GATE402_CHANNEL_CLAIM_EXPOSURE', 1_000_000, { min: 1 })),
    maxAgeMs: envInt(env, 'GATE402_CHANNEL_CLAIM_MAX_AGE_SECONDS', 3600, { min: 1, max: 30 * 86_400 }) * 1000,
    maxRows: envInt(env, 'GATE402_CHANNEL_CLAIM_MAX_ROWS', 50, { min: 1, max: 200 }),
    withdrawLookbackBlocks: envInt(env, 'GATE402_CHANNEL_WITHDRAW_LOOKBACK_BLOCKS', 20_000, { min: 1, max: 10_000_000 }),
    safety: {
      maxChannelExposure: BigInt(envInt(env, 'GATE402_CHANNEL_MAX_EXPOSURE', 10_000_000, { min: 1 })),
      maxNetworkExposure: BigInt(envInt(env, 'GATE402_CHANNEL_MAX_NETWORK_EXPOSURE', 100_000_000, { min: 1 })),
      gasHeadroom: envInt(env, 'GATE402_CHANNEL_GAS_HEADROOM', 3, { min: 1, max: 100 }),
      stallMs: envInt(env, 'GATE402_CHANNEL_CLAIM_STALL_SECONDS', 120, { min: 10, max: 86_400 }) * 1000,
    },
  };
  // A pending withdrawal is claimed against at the next round: rounds must come many times within the delay.
  if (claims.intervalMs * 10 > withdrawDelay * 1000) {
    throw new ConfigError('GATE402_CHANNEL_CLAIM_INTERVAL_MS must be at most a tenth of GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS (a withdrawal must meet many claim rounds before it can be finalized)');
  }
  const withdrawMarginSeconds = envInt(env, 'GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS', devnet ? DEVNET_MARGIN : MARGIN, { min: 1, max: MAX_WITHDRAW_DELAY });
  if (withdrawMarginSeconds * 1000 < claims.intervalMs * 4 || withdrawMarginSeconds >= withdrawDelay) {
    throw new ConfigError(
      'GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS must be below GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS and at least four claim rounds (GATE402_CHANNEL_CLAIM_INTERVAL_MS): the vouchers accepted before it must be claimed within it',
    );
  }
  if (claims.safety.stallMs >= withdrawMarginSeconds * 1000) {
    throw new ConfigError(
      'GATE402_CHANNEL_CLAIM_STALL_SECONDS must be below GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS: a claim that cannot mine must stop vouchers well before a withdrawal can finalize',
    );
  }
  if (key !== '' && !devnet) {
    const unsafe = offDevnetProblem({ withdrawDelay, withdrawMarginSeconds, stallMs: claims.safety.stallMs, gasHeadroom: claims.safety.gasHeadroom });
    if (unsafe) throw new ConfigError(`payment channels (GATE402_CHANNEL_AUTHORIZER_KEY) off the devnet: ${unsafe}`);
  }
  const chainReadsPerSecond = envInt(env, 'GATE402_CHANNEL_CHAIN_READS_PER_SECOND', 20, { min: 1, max: 10_000 });
  const minRefund = BigInt(envInt(env, 'GATE402_CHANNEL_MIN_REFUND', 10_000, { min: 1 }));
  const refundWaitMs = envInt(env, 'GATE402_CHANNEL_REFUND_WAIT_MS', 30_000, { min: 1_000, max: 300_000 });
  return { authorizerKey: key === '' ? undefined : (key as Hex), withdrawDelay, claims, withdrawMarginSeconds, chainReadsPerSecond, minRefund, refundWaitMs };
}

/** Why the claim path's margins are unsafe off the devnet (see the file's comment), or undefined. */
export function offDevnetProblem(s: { withdrawDelay: number; withdrawMarginSeconds: number; stallMs: number; gasHeadroom: number }): string | undefined {
  if (s.withdrawMarginSeconds < MIN_MARGIN_OFF_DEVNET) {
    return `GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS must be at least ${MIN_MARGIN_OFF_DEVNET} (an hour): the last voucher accepted before a pending withdrawal's deadline has only the margin for its claim to land, through relayer, RPC or chain outages`;
  }
  if (s.withdrawMarginSeconds * 2 > s.withdrawDelay) {
    return "GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS must be at most half of GATE402_CHANNEL_WITHDRAW_DELAY_SECONDS (raise the delay, within the scheme's 900 to 2592000, or lower the margin)";
  }
  if (s.stallMs * 4 > s.withdrawMarginSeconds * 1000) {
    return 'GATE402_CHANNEL_CLAIM_STALL_SECONDS must be at most a quarter of GATE402_CHANNEL_WITHDRAW_MARGIN_SECONDS: a claim that cannot mine must stop vouchers early in the margin';
  }
  if (s.gasHeadroom < 2) return 'GATE402_CHANNEL_GAS_HEADROOM must be at least 2: the relayers must hold twice what the pending claims cost at the live gas price';
  return undefined;
}
