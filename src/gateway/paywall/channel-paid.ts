/**
 * A request paid through a payment channel (x402 `batch-settlement`, read by `front-door/batch-settlement.ts`):
 * the channel's record (`channels/`) decides, by compare-and-set, which voucher is the next one; the voucher is
 * made durable and marked pending (the write-ahead) BEFORE the upstream is called; the charge is committed only once
 * the upstream answered well, else the pending is released and nothing is charged. A deposit is verified and settled
 * through the settlement port first, and its voucher then accepted the same way.
 *
 * Every refusal is a 402 with the spec's reason as the x402 `error` (the official client reads it); a voucher out
 * of step gets the corrective 402: the route's channel offer carrying `channelState` (with the server's
 * `chargedCumulativeAmount`) and `voucherState` (the highest voucher it holds, with its signature).
 */
import type { Hex } from 'viem';
import { BOOT } from '../../cluster/boot.ts';
import type { ChannelLedger, HeldRecord } from '../../channels/channel-ledger.ts';
import { committed, exposureOf, headroom, openedRecord, pendingLive, released, resolvedPending, withBalance, withdrawClosing, withPending, type ChannelRecord } from '../../channels/channel-record.ts';
import type { ChannelReader } from '../../channels/chain-channel.ts';
import { ChannelReadsExhausted } from '../../channels/chain-read-budget.ts';
import { CHANNEL_PROTOCOL, correctiveTerms, voucherSettlement, type ChannelCredential } from '../../front-door/batch-settlement.ts';
import type { HttpResponse } from '../../http/server.ts';
import { SETTLEMENT_SHED } from '../../ports/settlement.ts';
import type { UpstreamCall } from '../../ports/upstream.ts';
import type { SettleResponse } from '../../protocol/x402/types.ts';
import { classifyVoucherStep, type OnchainChannel } from '../../schemes/batch-settlement/cumulative.ts';
import { BatchReason } from '../../verify/batch-settlement-reasons.ts';
import type { ChannelStateExtra, VoucherStateExtra } from '../../schemes/batch-settlement/requirements.ts';
import { classifyVoucherSignature } from '../../schemes/batch-settlement/voucher.ts';
import { uncharged } from '../../protocol/result.ts';
import { behind, json, paidUnserved, pending as pendingAnswer, shedOf, unchargedAnswer } from './answers.ts';
import { paidAnswerHeaders } from './paid-headers.ts';
import type { ChannelOfferTerms } from './channel-offers.ts';
import type { PaywallRefunds } from './channel-refund.ts';
import { calledUpstream, preparedUpstream, type Purchase } from './paid-steps.ts';
import { SERVING_SLACK_MS, thisBootOnly, type BootLiveness } from './served-claims.ts';

/** What the paid route needs for payment channels (absent: no route offers them). */
export interface PaywallChannels {
  /** What the routes that take channels offer (receiver authorizer, withdraw delay). */
  offers: ChannelOfferTerms;
  ledger: ChannelLedger;
  /** The settlement contract's view of a channel. */
  readChannel: ChannelReader;
  /** Whose pending write-aheads still stand (default: this process's only; in a cluster, every live node's). */
  live?: BootLiveness;
  /**
   * Seconds before a payer's pending withdrawal can be finalized from which its channel takes no more vouchers
   * (default 0: until the deadline itself; the claim actors need the margin to claim what was accepted).
   */
  withdrawMarginSeconds?: number;
  /**
   * Why no voucher may be taken on a network now (`channels/claim-health.ts`): then none is accepted there (a 503,
   * nothing charged). Absent: nothing claims here, and nothing is checked.
   */
  blocked?(network: string): string | undefined;
  /** Told of each voucher's value once charged (the network's exposure, until the claimer's next round). */
  exposed?(network: string, amount: bigint): void;
  /** Asked when a channel reached its exposure cap: claim that network now. */
  claimSoon?(network: string): void;
  /** How far a network's chain clock runs ahead of this process's: withdrawal deadlines are judged by the later clock. */
  chainAheadMs?(network: string): number;
  /** A channel's accepted-but-unclaimed value beyond which it takes no voucher until claimed (absent: no cap). */
  maxChannelExposure?: bigint;
  /** Told of each voucher accepted (served and charged) or refused, by network and the refusal's reason (metrics). */
  counted?(network: string, outcome: 'accepted' | string): void;
  /** Cooperative refunds (`channel-refund.ts`); absent: a refund payload is refused, nothing touched. */
  refunds?: PaywallRefunds;
}

/** What a channel's answers need of a purchase (a refund has no breaker admission, no upstream). */
export type ChannelPurchase = Pick<Purchase, 'deps' | 'required' | 'req' | 'terms' | 'door' | 'credential'>;

/** How many times a request re-reads a record another request moved under it before it answers `channel_busy`. */
const MAX_RACES = 4;

const asked = (p: ChannelPurchase) => ({ method: p.req.method === 'POST' ? ('POST' as const) : ('GET' as const), path: p.req.path, digest: undefined });

/** The network a channel purchase pays on (its offer's). */
const networkOf = (p: ChannelPurchase) => (p.credential as ChannelCredential).offer.network;

/** A 402 whose x402 `error` is the spec's `reason` (what the official client reads), with fresh offers. */
export function refusedWith(p: ChannelPurchase, c: PaywallChannels, reason: string, settlement?: SettleResponse): HttpResponse {
  c.counted?.(networkOf(p), reason);
  return p.required.refused(p.terms, asked(p), { problem: 'verification-failed', detail: reason, ...(settlement ? { settlement } : {}) });
}

export function channelStateOf(r: ChannelRecord): ChannelStateExtra {
  return { channelId: r.channelId, balance: r.balance, totalClaimed: r.totalClaimed, withdrawRequestedAt: r.withdrawRequestedAt, refundNonce: r.refundNonce, chargedCumulativeAmount: r.charged };
}

function voucherStateOf(r: ChannelRecord): VoucherStateExtra | undefined {
  return r.signature === '0x' ? undefined : { signedMaxClaimable: r.signedMaxClaimable, signature: r.signature };
}

const UNSAFE: Record<string, string> = {
  claims_behind: "this network's payment channel claims are behind (withdrawals not read in time)",
  claims_failing: "this network's payment channel claims are failing",
  claims_stalled: 'a payment channel claim on this network is not being mined',
  relayer_gas_low: "the gateway's relayers cannot pay for claiming payment channels on this network",
  network_exposure_cap: 'too much payment channel value on this network waits to be claimed',
  no_live_claimer: 'no gateway node is claiming payment channels right now',
  channel_exposure_cap: "too much of this channel's value waits to be claimed; it is being claimed",
};

/**
 * The claim path could not protect one more voucher (`channels/claim-health.ts`) or the channel holds its cap of
 * unclaimed value: a 503 before anything is charged or served; the same voucher is good after Retry-After.
 */
function claimsUnsafe(c: PaywallChannels, network: string, reason: string): HttpResponse {
  c.counted?.(network, reason);
  const refusal = uncharged('channel_claims_unsafe', UNSAFE[reason] ?? 'payment channel claims cannot protect a voucher right now', 503).error;
  return unchargedAnswer(refusal, { code: refusal.code, reason, retry: 'send the same voucher after Retry-After seconds' }, { 'retry-after': '5' });
}

/** The corrective 402: the voucher is out of step with the record; the offer carries what the server holds. */
export function corrective(p: ChannelPurchase, c: PaywallChannels, r: ChannelRecord): HttpResponse {
  const cred = p.credential as ChannelCredential;
  c.counted?.(cred.offer.network, BatchReason.cumulativeAmountMismatch);
  const terms = correctiveTerms(p.terms, cred.offer, channelStateOf(r), voucherStateOf(r));
  return p.required.refused(terms, asked(p), { problem: 'verification-failed', detail: BatchReason.cumulativeAmountMismatch });
}

/** A record for a channel the gateway has none of, from the chain: undefined when the chain has no balance either. */
async function recordFromChain(c: PaywallChannels, cred: ChannelCredential, now: number): Promise<HeldRecord | undefined> {
  const chain = await c.readChannel(cred.offer.network, cred.channelId);
  if (chain.balance === 0n) return undefined;
  const fresh = openedRecord({ channelId: cred.channelId, network: cred.offer.network, config: cred.payload.config, ...chain, now });
  return (await c.ledger.create(fresh)) ?? (await c.ledger.read(cred.channelId));
}

/** Whether a refund holds the channel (its record open; a hold whose refund ended is stale and ignored). */
async function refundUnderWay(c: PaywallChannels, r: ChannelRecord | undefined): Promise<boolean> {
  const id = r?.refunding?.id;
  return id !== undefined && (c.refunds ? await c.refunds.desk.open(id) : true);
}

/** The record with a dead server's pending write-ahead resolved (committed, see `channels/channel-record.ts`). */
async function settledPending(c: PaywallChannels, held: HeldRecord, now: number): Promise<HeldRecord | 'busy' | 'raced'> {
  const pending = held.record.pending;
  if (!pending) return held;
  if (await pendingLive(pending, c.live ?? thisBootOnly, now)) return 'busy';
  return (await c.ledger.replace(held, resolvedPending(held.record, now))) ?? 'raced';
}

export async function channelPaid(p: Purchase, c: PaywallChannels): Promise<HttpResponse> {
  const cred = p.credential as ChannelCredential;
  const { payload, offer } = cred;
  // Refunds are the refund desk's (`channel-refund.ts`), dispatched before this; none reaches a paid request.
  if (payload.type === 'refund') return refusedWith(p, c, BatchReason.refundPayload);
  // An accepted voucher must be claimable before any withdrawal takes the escrow back: not while the claim path is unsafe.
  const block = c.blocked?.(offer.network);
  if (block) return claimsUnsafe(c, offer.network, block);
  const upstream = await preparedUpstream(p);
  if (!upstream.ok) return upstream.error;
  // One ECDSA recovery, no I/O: a payer whose vouchers only EIP-1271 could check is refused (not supported here).
  if ((await classifyVoucherSignature(payload.config, payload.voucher, cred.chainId)) !== 'valid') return refusedWith(p, c, BatchReason.voucherSignature);
  const price = BigInt(offer.amount);
  const cumulative = payload.voucher.maxClaimableAmount;
  const now = p.deps.now();
  let held: HeldRecord | undefined;
  try {
    held = (await c.ledger.read(cred.channelId)) ?? (await recordFromChain(c, cred, now));
  } catch (err) {
    // Out of chain-read budget is what a flood of made-up channels meets: answered, not logged line by line.
    const exhausted = err instanceof ChannelReadsExhausted;
    if (!exhausted) p.deps.log.warn('could not read a payment channel', { channel: cred.channelId, error: err });
    return json(503, { error: 'the payment channel could not be read right now; nothing was charged' }, { 'retry-after': String(exhausted ? err.retryAfterSeconds : 2) });
  }
  let depositTx: string | undefined;
  if (payload.type === 'deposit') {
    const charged = held ? BigInt(held.record.charged) : 0n;
    if (held?.record.pending || (await refundUnderWay(c, held?.record))) return refusedWith(p, c, BatchReason.channelBusy);
    if (classifyVoucherStep(cumulative, { charged, ...(held ? { signedMaxClaimable: BigInt(held.record.signedMaxClaimable) } : {}) }, price) !== 'next') {
      return held ? corrective(p, c, held.record) : refusedWith(p, c, BatchReason.cumulativeAmountMismatch);
    }
    const balanceAfter = (held ? BigInt(held.record.balance) : 0n) + payload.deposit.amount;
    if (cumulative > balanceAfter) return refusedWith(p, c, BatchReason.cumulativeExceedsBalance);
    const deposited = await deposit(p, c, cred, held, now);
    if ('answer' in deposited) return deposited.answer;
    held = deposited.held;
    depositTx = deposited.transaction;
  }
  if (!held) return refusedWith(p, c, BatchReason.channelNotFound);
  // The write-ahead: the voucher durable and pending before the upstream is called.
  let ahead: HeldRecord | undefined;
  for (let race = 0; race < MAX_RACES && !ahead; race++) {
    if (race > 0) {
      const again = await c.ledger.read(cred.channelId);
      if (!again) return refusedWith(p, c, BatchReason.missingChannel);
      held = again;
    }
    const resolved = await settledPending(c, held, now);
    if (resolved === 'busy') return refusedWith(p, c, BatchReason.channelBusy);
    if (resolved === 'raced') continue;
    held = resolved;
    const r = held.record;
    // A refund holds the channel: what it returns is not there to be spent.
    if (await refundUnderWay(c, r)) return refusedWith(p, c, BatchReason.channelBusy);
    const step = classifyVoucherStep(cumulative, { charged: BigInt(r.charged), signedMaxClaimable: BigInt(r.signedMaxClaimable) }, price);
    if (step !== 'next') return corrective(p, c, r);
    // The payer is taking the unclaimed escrow back: a voucher accepted this near the deadline might not be claimed in time.
    if (withdrawClosing(r, now + (c.chainAheadMs?.(offer.network) ?? 0), c.withdrawMarginSeconds ?? 0)) return refusedWith(p, c, BatchReason.cumulativeExceedsBalance);
    // What the merchant would lose if the claims failed: bounded per channel; the claim is asked for, the voucher waits.
    if (c.maxChannelExposure !== undefined && exposureOf(r) + price > c.maxChannelExposure) {
      c.claimSoon?.(offer.network);
      return claimsUnsafe(c, offer.network, 'channel_exposure_cap');
    }
    // Never beyond the deposit: the balance as last read, minus what is already accepted.
    if (price > headroom(r)) {
      const refreshed = await balanceRead(c, cred, held, now);
      if (refreshed === undefined || price > headroom(refreshed.record)) return refusedWith(p, c, BatchReason.cumulativeExceedsBalance);
      held = refreshed;
    }
    const until = now + p.deps.upstream.timeoutMs + SERVING_SLACK_MS;
    ahead = await c.ledger.replace(held, withPending(held.record, { cumulative, signature: payload.voucher.signature }, BOOT, until, now));
  }
  if (!ahead) return refusedWith(p, c, BatchReason.channelBusy);
  return servedOnVoucher(p, c, cred, ahead, upstream.value, depositTx);
}

/** The channel's balance read again (a top-up made elsewhere): the record moved to it, or undefined. */
async function balanceRead(c: PaywallChannels, cred: ChannelCredential, held: HeldRecord, now: number): Promise<HeldRecord | undefined> {
  let chain: OnchainChannel;
  try {
    chain = await c.readChannel(cred.offer.network, cred.channelId);
  } catch {
    return undefined;
  }
  if (chain.balance <= BigInt(held.record.balance)) return undefined;
  return c.ledger.replace(held, withBalance(held.record, chain.balance, chain.totalClaimed, now));
}

/** The deposit verified and settled through the port, and the record moved to the channel's new balance. */
async function deposit(
  p: Purchase,
  c: PaywallChannels,
  cred: ChannelCredential,
  held: HeldRecord | undefined,
  now: number,
): Promise<{ answer: HttpResponse } | { held: HeldRecord; transaction: string }> {
  const settlement = await p.deps.settlement.settle(cred.request, p.client);
  if (!settlement.success && settlement.errorReason === SETTLEMENT_SHED) return { answer: behind(shedOf(settlement)) };
  if (settlement.status === 'pending') return { answer: pendingAnswer(settlement, await p.door.receipt(settlement, cred)) };
  if (!settlement.success) return { answer: refusedWith(p, c, settlement.errorReason ?? BatchReason.depositPayload, settlement) };
  const amount = cred.payload.type === 'deposit' ? cred.payload.deposit.amount : 0n;
  let chain: OnchainChannel | undefined;
  try {
    chain = await c.readChannel(cred.offer.network, cred.channelId);
  } catch (err) {
    p.deps.log.warn('could not read a channel after its deposit', { channel: cred.channelId, error: err });
  }
  for (let race = 0; race < MAX_RACES; race++) {
    const current = race === 0 ? held : await c.ledger.read(cred.channelId);
    const known = current ? BigInt(current.record.balance) : 0n;
    const balance = chain && chain.balance > known ? chain.balance : known + amount;
    const totalClaimed = chain?.totalClaimed ?? (current ? BigInt(current.record.totalClaimed) : 0n);
    const moved = current
      ? await c.ledger.replace(current, withBalance(current.record, balance, totalClaimed, now))
      : await c.ledger.create(openedRecord({ channelId: cred.channelId, network: cred.offer.network, config: cred.payload.config, balance, totalClaimed, now }));
    if (moved) return { held: moved, transaction: settlement.transaction };
  }
  // The deposit is on chain (the payer's money is in its own channel); the record will be read from it next time.
  p.deps.log.warn('a deposit settled but its channel record raced too often', { channel: cred.channelId, transaction: settlement.transaction });
  return { answer: refusedWith(p, c, BatchReason.channelBusy) };
}

/** The upstream called on a pending voucher: committed if it answered well, else released (nothing charged). */
async function servedOnVoucher(p: Purchase, c: PaywallChannels, cred: ChannelCredential, ahead: HeldRecord, call: UpstreamCall, transaction: string | undefined): Promise<HttpResponse> {
  const price = BigInt(cred.offer.amount);
  let answer: ReturnType<typeof calledUpstream>;
  let failure = '';
  try {
    const result = await call();
    answer = calledUpstream(p, result);
    if (!answer) failure = !result.ok ? result.error.message : `status ${result.value.status}`;
  } catch (err) {
    failure = err instanceof Error ? err.message : String(err);
  }
  const now = p.deps.now();
  if (!answer) {
    const gone = await finish(c, ahead, (r) => released(r, now));
    if (!gone) p.deps.log.error('could not release a pending voucher', { channel: cred.channelId });
    p.deps.log.warn('upstream failed on a channel voucher; not charged', { channel: cred.channelId, merchant: p.merchant.slug, error: failure });
    c.counted?.(cred.offer.network, 'upstream_failed');
    const settlement = voucherSettlement({ network: cred.offer.network, payer: cred.payload.config.payer, price: 0n, channelState: channelStateOf(gone?.record ?? ahead.record) });
    return paidUnserved('the merchant upstream failed; your voucher was not charged, send it again', { ...settlement, success: false, errorReason: 'upstream_failed' }, {});
  }
  const done = await finish(c, ahead, (r) => committed(r, now));
  const record = done?.record ?? ahead.record;
  if (!done) p.deps.log.error('could not commit a served voucher (it stays pending, and is committed when next read)', { channel: cred.channelId });
  c.counted?.(cred.offer.network, 'accepted');
  c.exposed?.(cred.offer.network, price);
  p.deps.metrics.revenue(p.merchant.slug, CHANNEL_PROTOCOL, Number(p.route.priceUsd));
  const charged = done ? record.charged : (ahead.record.pending?.cumulative ?? record.charged);
  const settlement = voucherSettlement({
    network: cred.offer.network,
    payer: cred.payload.config.payer,
    price,
    channelState: { ...channelStateOf(record), chargedCumulativeAmount: charged },
    ...(transaction ? { transaction } : {}),
  });
  const receipt = await p.door.receipt(settlement, cred);
  return { status: answer.status, headers: paidAnswerHeaders(answer.headers, receipt), body: answer.status === 204 ? new Uint8Array(0) : answer.body };
}

/** Moves our pending record on by `move`, re-reading if something else (a top-up read) moved it meanwhile. */
async function finish(c: PaywallChannels, ahead: HeldRecord, move: (r: ChannelRecord) => ChannelRecord): Promise<HeldRecord | undefined> {
  let held: HeldRecord | undefined = ahead;
  const mine = ahead.record.pending;
  for (let race = 0; race < MAX_RACES && held; race++) {
    const pendingNow = held.record.pending;
    if (!pendingNow || pendingNow.cumulative !== mine?.cumulative || pendingNow.boot !== mine.boot) return undefined;
    const moved = await c.ledger.replace(held, move(held.record));
    if (moved) return moved;
    held = await c.ledger.read(held.record.channelId as Hex);
  }
  return undefined;
}
