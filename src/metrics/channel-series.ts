/**
 * Payment channels (x402 `batch-settlement`): vouchers accepted or refused by the paywall, by reason; the channels held
 * with escrow left; claims and sweeps (`channels/claimer.ts`) by outcome,
 * vouchers claimed and rows dropped at simulation, what is accepted but not yet claimed on each network, and the
 * nearest deadline by which a payer's withdrawal could take unclaimed escrow back; cooperative refunds
 * (`channels/refund-desk.ts`) by outcome and what they returned to the payers.
 */
import type { Counter, Gauge } from 'prom-client';
import type { MetricKit } from './metric-kit.ts';

export interface ChannelSeries {
  /** The claim outcomes and sweep outcomes on each network where channels are claimed, at zero. */
  declareChannelClaims(
    networks: readonly string[],
    known: { claimOutcomes: readonly string[]; sweepOutcomes: readonly string[]; dropReasons: readonly string[]; blockReasons?: readonly string[] },
  ): void;
  /** Vouchers the paywall took (`accepted`: served and charged; `refunded`: a refund carried out) or refused, by network and outcome (the refusal's reason). */
  readonly channelVouchers: Counter<'network' | 'outcome'>;
  /** Channels held with escrow left (balance above what was claimed), as of the claimer's last round. */
  readonly channelsOpen: Gauge<'network'>;
  /** Claim actors finished, by network and final state (`swept`, `empty`, `failed`, `reverted`, `sweepFailed`, `stalled`). */
  readonly channelClaims: Counter<'network' | 'outcome'>;
  /** Vouchers (channel rows) claimed by a mined claim transaction. */
  readonly channelClaimedVouchers: Counter<'network'>;
  /** Rows left out of a claim because the simulation found they would revert, by the contract's error. */
  readonly channelClaimRowsDropped: Counter<'network' | 'reason'>;
  /** Sweeps to the merchants' wallets, by outcome (`swept`, `failed`). */
  readonly channelSweeps: Counter<'network' | 'outcome'>;
  /** Accepted (charged) and not yet claimed on chain, in the tokens' smallest units, as of the last claimer round. */
  readonly channelUnclaimedExposure: Gauge<'network'>;
  /** Unix seconds of the nearest pending withdrawal's finalization among the channels held (0: none pending). */
  readonly channelWithdrawDeadline: Gauge<'network'>;
  /** 1 for why a network takes no channel voucher now (`channels/claim-health.ts`), 0 for the other reasons. */
  readonly channelVouchersBlocked: Gauge<'network' | 'reason'>;
  /** The refund outcomes on each network where channels are refunded, at zero. */
  declareChannelRefunds(networks: readonly string[], outcomes: readonly string[]): void;
  /** Refund actors finished, by network and final state (`refunded`, `refused`, `failed`, `reverted`, `stalled`). */
  readonly channelRefunds: Counter<'network' | 'outcome'>;
  /** What refunds returned to payers, in the tokens' smallest units. */
  readonly channelRefunded: Counter<'network'>;
}

export function channelSeries(kit: MetricKit): ChannelSeries {
  const channelVouchers = kit.counter({
    name: 'gate402_channel_vouchers_total',
    help: "Payment-channel vouchers at the paywall, by network and outcome: accepted (served and charged), refunded (a refund voucher carried out), or the refusal's reason (nothing charged)",
    labelNames: ['network', 'outcome'],
  });
  const channelsOpen = kit.gauge({
    name: 'gate402_channels_open',
    help: "Payment channels held with escrow left (balance above what was claimed), by network, as of the claimer's last round",
    labelNames: ['network'],
  });
  const channelClaims = kit.counter({ name: 'gate402_channel_claims_total', help: 'Payment-channel claim actors finished, by network and final state', labelNames: ['network', 'outcome'] });
  const channelClaimedVouchers = kit.counter({ name: 'gate402_channel_claimed_vouchers_total', help: 'Channel vouchers claimed on chain by mined claim transactions', labelNames: ['network'] });
  const channelClaimRowsDropped = kit.counter({
    name: 'gate402_channel_claim_rows_dropped_total',
    help: "Channel rows left out of a claim because its simulation would revert, by the settlement contract's error",
    labelNames: ['network', 'reason'],
  });
  const channelSweeps = kit.counter({ name: 'gate402_channel_sweeps_total', help: "Sweeps of claimed channel funds to the merchants' wallets, by outcome", labelNames: ['network', 'outcome'] });
  const channelUnclaimedExposure = kit.gauge({
    name: 'gate402_channel_unclaimed_exposure',
    help: "Accepted and not yet claimed channel value, in the tokens' smallest units, as of the claimer's last round",
    labelNames: ['network'],
  });
  const channelWithdrawDeadline = kit.gauge({
    name: 'gate402_channel_withdraw_deadline_timestamp_seconds',
    help: "Unix seconds at which the nearest payer's pending withdrawal can be finalized, among the channels held (0: none)",
    labelNames: ['network'],
  });
  const channelVouchersBlocked = kit.gauge({
    name: 'gate402_channel_vouchers_blocked',
    help: "Whether a network takes no payment-channel voucher now (1), by why, as of its claimer's last round: the claim path could not protect one",
    labelNames: ['network', 'reason'],
  });
  const channelRefunds = kit.counter({ name: 'gate402_channel_refunds_total', help: 'Payment-channel refund actors finished, by network and final state', labelNames: ['network', 'outcome'] });
  const channelRefunded = kit.counter({ name: 'gate402_channel_refunded_total', help: "What channel refunds returned to payers, in the tokens' smallest units", labelNames: ['network'] });
  return {
    declareChannelRefunds(networks, outcomes) {
      for (const network of networks) {
        for (const outcome of outcomes) channelRefunds.labels(network, outcome).inc(0);
        channelRefunded.labels(network).inc(0);
      }
    },
    channelRefunds,
    channelRefunded,
    declareChannelClaims(networks, known) {
      for (const network of networks) {
        for (const outcome of known.claimOutcomes) channelClaims.labels(network, outcome).inc(0);
        for (const outcome of known.sweepOutcomes) channelSweeps.labels(network, outcome).inc(0);
        for (const reason of known.dropReasons) channelClaimRowsDropped.labels(network, reason).inc(0);
        channelClaimedVouchers.labels(network).inc(0);
        channelVouchers.labels(network, 'accepted').inc(0);
        channelsOpen.labels(network).set(0);
        channelUnclaimedExposure.labels(network).set(0);
        channelWithdrawDeadline.labels(network).set(0);
        for (const reason of known.blockReasons ?? []) channelVouchersBlocked.labels(network, reason).set(0);
      }
    },
    channelVouchers,
    channelsOpen,
    channelClaims,
    channelClaimedVouchers,
    channelClaimRowsDropped,
    channelSweeps,
    channelUnclaimedExposure,
    channelWithdrawDeadline,
    channelVouchersBlocked,
  };
}
