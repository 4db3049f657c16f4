/**
 * Whether the claim path of a network can protect one more accepted voucher. A merchant serves a voucher before it is
 * paid on chain: only a claim landing before the payer's withdrawal finalizes pays it. So the paywall takes a voucher
 * on a network only while, as of the claimer's last round (`claimer.ts`):
 * - the settlement contract's withdrawal events were read recently (a payer's withdrawal is seen in time);
 * - the last claim did not fail, and no claim has been running longer than `stallMs` (a claim that cannot mine);
 * - the relayers that can each pay for a claim hold together what claiming every channel with exposure (and the next
 *   one) costs at the live gas price, times `gasHeadroom` ({@link claimCostWei});
 * - the network's accepted-but-unclaimed value is below `maxNetworkExposure` (the round's reading plus what this
 *   node accepted since).
 * Otherwise it answers why not (a {@link ClaimBlock}): the paywall refuses with a 503 and charges nothing.
 * Each reading also notes how far the chain's clock runs ahead of the gateway's: a withdrawal's deadline is in chain
 * time, so the paywall judges the margin by the later of the two clocks.
 */
import type { Logger } from '../log/logger.ts';
import type { ClaimChain } from './claim-steps.ts';

/** Why no voucher is taken on a network now. */
export const CLAIM_BLOCKS = ['claims_behind', 'claims_failing', 'claims_stalled', 'relayer_gas_low', 'network_exposure_cap', 'no_live_claimer'] as const;
export type ClaimBlock = (typeof CLAIM_BLOCKS)[number];

/** Sets the blocked gauge of `network`: 1 at `block`'s reason, 0 at the others. */
export function reportBlock(gauge: { labels(network: string, reason: string): { set(v: number): void } }, network: string, block: ClaimBlock | undefined): void {
  for (const reason of CLAIM_BLOCKS) gauge.labels(network, reason).set(reason === block ? 1 : 0);
}

export interface ClaimSafety {
  /** A channel's accepted-but-unclaimed value beyond which it takes no voucher until claimed. */
  maxChannelExposure: bigint;
  /** A network's accepted-but-unclaimed value at which it takes no voucher until claimed. */
  maxNetworkExposure: bigint;
  /** The relayers must hold this many times the cost of the pending claims at the live gas price. */
  gasHeadroom: number;
  /** A claim running longer than this (not mined) counts as stalled. */
  stallMs: number;
}

/**
 * Gas of a claim transaction besides its rows, of each row, and of a sweep (one `settle`). Well above what the
 * devnet's contracts use (their receipts in test/batch-settlement-contracts.test.ts: a claim of one channel 30k, a
 * sweep 24.5k) and the spec's figures (~40k for one channel alone, ~19k a channel in a claim of ten), so the estimate
 * errs on the side of refusing vouchers.
 */
export const CLAIM_TX_GAS = 60_000n;
export const CLAIM_ROW_GAS = 40_000n;
export const SWEEP_TX_GAS = 60_000n;

/** Gas of claiming `rows` channels (in claims of at most `maxRows`), each claim swept once. */
export function claimGas(rows: number, maxRows: number): bigint {
  if (rows <= 0) return 0n;
  const claims = BigInt(Math.ceil(rows / maxRows));
  return claims * (CLAIM_TX_GAS + SWEEP_TX_GAS) + BigInt(rows) * CLAIM_ROW_GAS;
}

/** What claiming `rows` channels costs at `gasPrice` (wei), with the headroom factor (tenths kept). */
export function claimCostWei(rows: number, maxRows: number, gasPrice: bigint, headroom: number): bigint {
  return (claimGas(rows, maxRows) * gasPrice * BigInt(Math.round(headroom * 10))) / 10n;
}

/**
 * Whether the relayers can pay for the pending claims: those that can each send the largest single claim (and take
 * work at all: `minBalanceWei`) hold together at least `needWei`. A relayer below that is counted out: the pool
 * could hand it a claim it cannot pay for.
 */
export function relayersCover(balances: readonly bigint[], o: { needWei: bigint; oneClaimWei: bigint; minBalanceWei: bigint }): { ok: boolean; spendableWei: bigint } {
  let floor = o.minBalanceWei;
  if (o.oneClaimWei > floor) floor = o.oneClaimWei;
  let spendableWei = 0n;
  for (const b of balances) if (b >= floor) spendableWei += b;
  return { ok: spendableWei >= o.needWei && spendableWei > 0n, spendableWei };
}

/** What the claimer knows of one network, as of its rounds. */
export interface NetworkClaimState {
  /** When the withdrawal events were last read up to the head. */
  scannedAt?: number;
  /** The last claim ended without its transaction mined. */
  failing: boolean;
  /** When the claim running now started. */
  busySince?: number;
  /** Accepted-but-unclaimed value as of the last round, and what was accepted here since. */
  exposure: bigint;
  acceptedSince: bigint;
  /** Whether the relayers covered the pending claims at the last reading (undefined: not read yet). */
  funded?: boolean;
  /** How far the chain's clock (its head's timestamp) ran ahead of this process's at the last reading (0 if behind). */
  aheadMs: number;
}

/** Why the network takes no voucher now (see the file's comment), or undefined when it may. */
export function claimBlockOf(s: NetworkClaimState | undefined, safety: ClaimSafety, o: { now: number; intervalMs: number }): ClaimBlock | undefined {
  const window = Math.max(5 * o.intervalMs, 60_000);
  if (!s || s.scannedAt === undefined || o.now - s.scannedAt > window) return 'claims_behind';
  if (s.failing) return 'claims_failing';
  if (s.busySince !== undefined && o.now - s.busySince > safety.stallMs) return 'claims_stalled';
  if (s.funded !== true) return 'relayer_gas_low';
  if (s.exposure + s.acceptedSince >= safety.maxNetworkExposure) return 'network_exposure_cap';
  return undefined;
}

/**
 * The relayers' funding for claiming `rows` channels with exposure and one more: the live gas price and balances
 * read (the pool keeps the balances for its own picks too), the need and what the relayers can spend. A reading that
 * fails is not funded (claims could not land either).
 */
export async function fundingOf(chain: Pick<ClaimChain, 'courier'>, rows: number, maxRows: number, headroom: number, now: number): Promise<Funding> {
  try {
    const [gasPrice, relayers, head] = await Promise.all([chain.courier.client.getGasPrice(), chain.courier.pool.refreshBalances(), chain.courier.client.getBlock({ blockTag: 'latest' })]);
    const aheadMs = Math.max(0, Number(head.timestamp) * 1000 - now);
    const needWei = claimCostWei(rows + 1, maxRows, gasPrice, headroom);
    const oneClaimWei = claimCostWei(Math.min(rows + 1, maxRows), maxRows, gasPrice, headroom);
    const cover = relayersCover(
      relayers.map((r) => r.balance),
      { needWei, oneClaimWei, minBalanceWei: chain.courier.pool.minBalanceWei },
    );
    return { ok: cover.ok, needWei, spendableWei: cover.spendableWei, gasPrice, rows, aheadMs };
  } catch (error) {
    return { ok: false, rows, error };
  }
}

export type Funding = { ok: boolean; rows: number; needWei?: bigint; spendableWei?: bigint; gasPrice?: bigint; aheadMs?: number; error?: unknown };

export const newClaimState = (): NetworkClaimState => ({ failing: false, exposure: 0n, acceptedSince: 0n, aheadMs: 0 });

/** Logs a change of the relayers' funding: an error once when they can no longer pay, info when they can again. */
export function logFundingChange(log: Logger, network: string, was: boolean | undefined, f: Funding): void {
  if ((was ?? true) === f.ok) return;
  if (f.ok) log.info('the relayers can pay for the pending channel claims again', { network, ...f });
  else log.error('the relayers cannot pay for the pending channel claims (or were not read): no voucher is taken here', { network, ...f });
}
