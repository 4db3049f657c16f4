/**
 * The I/O of a refund actor (`refund-machine.ts`): the channel held for the refund by compare-and-set, the chain
 * read, the refund's amount decided and checked, the one transaction built (`multicall` of the claim of the payer's
 * zero-charge voucher, the merchant's sweep and `refundWithSignature` for the channel's refund nonce), simulated as
 * the relayer that will send it, signed and sent with its trail written first (the claim actors' `sendDurably` and
 * `confirmed`, on the engine's relayers: one nonce manager per chain), and the channel record moved to the chain's
 * view afterwards. Funds go from the channel contract to the merchant and to the payer, never through gate402.
 */
import { decodeErrorResult, encodeFunctionData, parseEventLogs, type Hex } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS } from '../chain/canonical.ts';
import { batchSettlementAbi } from '../schemes/batch-settlement/abi.ts';
import { claimBatchTypedData } from '../schemes/batch-settlement/claim-batch.ts';
import type { OnchainChannel } from '../schemes/batch-settlement/cumulative.ts';
import { refundableAmount, refundTypedData } from '../schemes/batch-settlement/refund.ts';
import type { ChannelStateExtra } from '../schemes/batch-settlement/requirements.ts';
import { sendDurably, type Persist } from '../tx/courier.ts';
import type { SignedTx } from '../tx/trail.ts';
import { BatchReason } from '../verify/batch-settlement-reasons.ts';
import type { ChannelReader } from './chain-channel.ts';
import type { ChannelLedger, HeldRecord } from './channel-ledger.ts';
import { pendingLive, refundEnded, resolvedPending, withRefunding, type ChannelRecord } from './channel-record.ts';
import { claimCallData, estimate, revertData, simulationOf, type ClaimChain, type SimulationSender } from './claim-steps.ts';
import { RefundRefusal, type PreparedRefund, type RecordedRefund, type RefundRecord } from './refund-machine.ts';

/** What the refund steps need besides the chain: the records, the chain's own view, and the desk's rules. */
export interface RefundParts {
  ledger: ChannelLedger;
  readChannel: ChannelReader;
  /** Whose pending write-aheads still stand. */
  live(boot: string): boolean | Promise<boolean>;
  /** Whether the refund `id` is still under way (its record open): a hold of one that is not is stale. */
  open(id: string): Promise<boolean>;
  /** The smallest partial refund (a full refund of what is left is always taken). */
  minRefund: bigint;
  now(): number;
}

/** How many times a channel record moved under a refund step is read again before the step gives up. */
const MAX_RACES = 8;

const busy = () => new RefundRefusal(BatchReason.channelBusy, 'another payment or refund of this channel is under way; try again shortly');

/** The channel's snapshot as the spec returns it (`extra.channelState`). */
export function refundChannelState(r: ChannelRecord): ChannelStateExtra {
  return { channelId: r.channelId, balance: r.balance, totalClaimed: r.totalClaimed, withdrawRequestedAt: r.withdrawRequestedAt, refundNonce: r.refundNonce, chargedCumulativeAmount: r.charged };
}

/**
 * The refund's one call: the payer's zero-charge voucher claimed up to what was charged (a row at or below the
 * chain's total changes nothing), the merchant swept when the claim credits anything, then the refund.
 */
export function refundCallData(o: { record: RefundRecord; claimSignature: Hex; sweep: boolean; amount: bigint; nonce: bigint; refundSignature: Hex }): Hex {
  const { config, voucher } = o.record;
  const ceiling = BigInt(voucher.maxClaimableAmount);
  const claim = claimCallData(
    [{ channelId: o.record.channelId, config, maxClaimableAmount: voucher.maxClaimableAmount, signature: voucher.signature, totalClaimed: ceiling.toString(), exposure: '0' }],
    o.claimSignature,
  );
  const settle = encodeFunctionData({ abi: batchSettlementAbi, functionName: 'settle', args: [config.receiver, config.token] });
  const refund = encodeFunctionData({ abi: batchSettlementAbi, functionName: 'refundWithSignature', args: [config, o.amount, o.nonce, o.refundSignature] });
  return encodeFunctionData({ abi: batchSettlementAbi, functionName: 'multicall', args: [o.sweep ? [claim, settle, refund] : [claim, refund]] });
}

/**
 * The channel held for this refund: its dead server's pending voucher charged first; refused while a live voucher or
 * another open refund holds it, or when the zero-charge voucher is not exactly what the gateway has charged.
 */
async function hold(parts: RefundParts, record: RefundRecord): Promise<HeldRecord> {
  for (let race = 0; race < MAX_RACES; race++) {
    let held = await parts.ledger.read(record.channelId);
    if (!held) throw new RefundRefusal(BatchReason.missingChannel, 'the gateway holds no record of this channel');
    const r = held.record;
    if (r.refunding?.id === record.id) return held;
    if (r.refunding && (await parts.open(r.refunding.id))) throw busy();
    if (r.pending) {
      if (await pendingLive(r.pending, parts.live, parts.now())) throw busy();
      const resolved = await parts.ledger.replace(held, resolvedPending(r, parts.now()));
      if (!resolved) continue;
      held = resolved;
    }
    if (held.record.charged !== record.voucher.maxClaimableAmount) {
      throw new RefundRefusal(BatchReason.cumulativeAmountMismatch, `the refund voucher must be signed for exactly what was charged (${held.record.charged})`);
    }
    const moved = await parts.ledger.replace(held, withRefunding(held.record, record.id, parts.now()));
    if (moved) return moved;
  }
  throw busy();
}

/** The amount the refund returns, from the chain's view and what was charged; refused when it would move nothing or is not allowed. */
export function decideRefund(chain: OnchainChannel, charged: bigint, requested: bigint | undefined, minRefund: bigint): bigint {
  if (chain.balance === 0n) throw new RefundRefusal(BatchReason.refundNoBalance, 'the channel holds nothing');
  if (charged > chain.balance) throw new RefundRefusal(BatchReason.cumulativeExceedsBalance, `the channel's balance ${chain.balance} is below what was charged (${charged})`);
  const claimedAfter = chain.totalClaimed > charged ? chain.totalClaimed : charged;
  const left = refundableAmount(chain.balance, claimedAfter, undefined);
  if (left === 0n) throw new RefundRefusal(BatchReason.refundNoBalance, 'nothing is left to refund: the balance is all charged');
  if (requested === undefined) return left;
  if (requested > left) throw new RefundRefusal(BatchReason.refundAmountInvalid, `at most ${left} can be refunded (the balance less what was charged)`);
  if (requested < minRefund && requested !== left) {
    throw new RefundRefusal(BatchReason.refundAmountInvalid, `a partial refund must be at least ${minRefund} (or exactly the ${left} left); each refund is a transaction the gateway pays for`);
  }
  return requested;
}

/** `preparing`: held, read, decided, signed and simulated. Throws a {@link RefundRefusal} (nothing sent) when refused. */
export async function prepareRefund(chain: ClaimChain, parts: RefundParts, record: RefundRecord, sender: SimulationSender): Promise<PreparedRefund> {
  const held = await hold(parts, record);
  const onchain = await parts.readChannel(record.network, record.channelId);
  const charged = BigInt(held.record.charged);
  const amount = decideRefund(onchain, charged, record.requested === undefined ? undefined : BigInt(record.requested), parts.minRefund);
  const nonce = onchain.refundNonce;
  const voucherClaim = { config: record.config, maxClaimableAmount: charged, signature: record.voucher.signature, totalClaimed: charged };
  const claimSignature = await chain.authorizer.signTypedData(claimBatchTypedData([voucherClaim], chain.chainId));
  const refundSignature = await chain.authorizer.signTypedData(refundTypedData({ channelId: record.channelId, nonce, amount }, chain.chainId));
  const data = refundCallData({ record, claimSignature, sweep: charged > onchain.totalClaimed, amount, nonce, refundSignature });
  const simulated = await estimate(simulationOf(chain), data, sender);
  if (!simulated.ok) {
    const reverted = revertData(simulated.error);
    if (reverted === undefined && !/revert/i.test(String((simulated.error as Error)?.message))) throw simulated.error;
    throw new RefundRefusal(BatchReason.refundSimulationFailed, `the refund would revert on chain (${errorName(reverted)}); nothing was sent`);
  }
  return { amount, nonce, gas: (simulated.gas * 13n) / 10n + 20_000n, data };
}

function errorName(data: Hex | undefined): string {
  if (!data) return 'no reason given';
  try {
    return decodeErrorResult({ abi: batchSettlementAbi, data }).errorName;
  } catch {
    return data.slice(0, 10);
  }
}

/** `sending`: signed, its trail written by the machine (`persist`), and only then sent. */
export async function sendRefund(chain: ClaimChain, record: RefundRecord, gas: bigint, data: Hex, persist: Persist): Promise<SignedTx[]> {
  const sent = await sendDurably(chain.courier, { to: BATCH_SETTLEMENT_ADDRESS, data, gas }, record.txs, persist);
  if (!sent.ok) throw new Error(sent.error.message);
  return sent.value;
}

/** `recording`: what the chain refunded (its `Refunded` event), the channel record moved to the chain's view and released. */
export async function recordRefund(chain: ClaimChain, parts: RefundParts, record: RefundRecord): Promise<RecordedRefund> {
  const receipt = await chain.courier.client.getTransactionReceipt({ hash: record.tx as Hex });
  const events = parseEventLogs({ abi: batchSettlementAbi, eventName: 'Refunded', logs: receipt.logs.filter((l) => l.address.toLowerCase() === BATCH_SETTLEMENT_ADDRESS.toLowerCase()) });
  const mine = events.find((e) => e.args.channelId.toLowerCase() === record.channelId.toLowerCase());
  const onchain = await parts.readChannel(record.network, record.channelId);
  const released = await releaseHold(parts, record, onchain);
  if (!released) throw new Error(`channel ${record.channelId}: its record kept moving while the refund was recorded`);
  return { refunded: mine?.args.amount ?? 0n, channelState: refundChannelState(released) };
}

/** The refund's hold on the channel released, the chain's view taken when read (idempotent): the record as left. */
export async function releaseHold(parts: Pick<RefundParts, 'ledger' | 'now'>, record: RefundRecord, onchain: OnchainChannel | undefined): Promise<ChannelRecord | undefined> {
  for (let race = 0; race < MAX_RACES; race++) {
    const held = await parts.ledger.read(record.channelId);
    if (!held) return undefined;
    const next = refundEnded(held.record, record.id, onchain, parts.now());
    if (next === held.record) return held.record;
    const moved = await parts.ledger.replace(held, next);
    if (moved) return moved.record;
  }
  return undefined;
}
