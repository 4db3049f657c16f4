/**
 * The gateway's record of one payment channel (x402 `batch-settlement`), and its moves as pure functions. A record
 * changes only by compare-and-set on its `version` (`channel-ledger.ts`), so of two requests on one channel, on one
 * node or on two nodes sharing PostgreSQL, exactly one moves it from a given version.
 *
 * The paid voucher's life: `charged` is what the gateway has earned (the highest cumulative amount whose request was
 * served); a voucher `charged + price` is accepted by a write-ahead (`pending`: the voucher is durable, signature
 * included, BEFORE the upstream is called); the upstream answers well and the charge is committed
 * (`charged := pending.cumulative`), or it fails and the pending is released (nothing charged, the voucher's
 * signature is kept as the highest signed: it is a valid claim, never claimed beyond `charged`).
 *
 * A crash between the write-ahead and the commit leaves a pending of a boot that is no longer live (or past its
 * bound). It is resolved by COMMITTING it (`resolvedPending`): the upstream may have been served (at most once: the
 * pending blocks any other voucher of the channel until it is resolved), the payer signed exactly that amount, and
 * the buyer's client continues from it through the corrective 402, which carries that voucher and its signature.
 * A buyer may so pay for one answer a crash swallowed (one price, at most once per crash); the merchant never serves
 * unpaid, and no voucher is lost.
 */
import type { Address, Hex } from 'viem';
import type { ChannelConfig } from '../schemes/batch-settlement/channel-config.ts';
import { withdrawDeadline } from '../schemes/batch-settlement/cumulative.ts';

/** The voucher accepted and being served: durable before the upstream is called. */
export interface PendingVoucher {
  /** The voucher's cumulative ceiling (`charged + price`), decimal. */
  cumulative: string;
  signature: Hex;
  /** The boot (a run of a gateway process) serving it. */
  boot: string;
  /** Unix ms by which its upstream call and the commit must have ended: past it, it is resolved as a crash's. */
  until: number;
}

export interface ChannelRecord {
  channelId: Hex;
  /** CAIP-2 network. */
  network: string;
  config: ChannelConfig;
  /** The channel contract's `balance` and `totalClaimed` as last read (deposits read back, claims done), decimal. */
  balance: string;
  totalClaimed: string;
  /** The highest accepted (served) cumulative amount, decimal. */
  charged: string;
  /** The highest cumulative amount the payer has signed, and its signature (the claimable voucher). */
  signedMaxClaimable: string;
  signature: Hex;
  pending?: PendingVoucher;
  /**
   * A cooperative refund under way (`refund-desk.ts`): the channel takes no voucher, deposit or other refund until it
   * ends. It stands while the refund's record is open; a marker whose record is gone is stale and may be cleared.
   */
  refunding?: { id: string; since: number };
  /** Unix seconds a payer's timed withdrawal was initiated, 0 if none (as last read). */
  withdrawRequestedAt: number;
  refundNonce: string;
  /** Starts at 1; each write is `version + 1`, by compare-and-set. */
  version: number;
  /** Unix ms of the last write. */
  at: number;
}

/** A fresh record for a channel the chain knows (a deposit read back, or a channel first met with a balance). */
export function openedRecord(o: {
  channelId: Hex;
  network: string;
  config: ChannelConfig;
  balance: bigint;
  totalClaimed: bigint;
  withdrawRequestedAt?: number;
  refundNonce?: bigint;
  now: number;
}): Omit<ChannelRecord, 'version'> {
  return {
    channelId: o.channelId,
    network: o.network,
    config: o.config,
    balance: o.balance.toString(),
    totalClaimed: o.totalClaimed.toString(),
    // Whatever was claimed on chain was charged by someone: vouchers continue from it (as the official client recovers).
    charged: o.totalClaimed.toString(),
    signedMaxClaimable: o.totalClaimed.toString(),
    signature: '0x',
    withdrawRequestedAt: o.withdrawRequestedAt ?? 0,
    refundNonce: (o.refundNonce ?? 0n).toString(),
    at: o.now,
  };
}

/** The write-ahead: the voucher `cumulative` accepted, durable with its signature, and marked pending. */
export function withPending(r: ChannelRecord, voucher: { cumulative: bigint; signature: Hex }, boot: string, until: number, now: number): ChannelRecord {
  const higher = voucher.cumulative > BigInt(r.signedMaxClaimable);
  return {
    ...r,
    ...(higher ? { signedMaxClaimable: voucher.cumulative.toString(), signature: voucher.signature } : {}),
    pending: { cumulative: voucher.cumulative.toString(), signature: voucher.signature, boot, until },
    version: r.version + 1,
    at: now,
  };
}

/** The upstream answered well: the pending voucher is charged. */
export function committed(r: ChannelRecord, now: number): ChannelRecord {
  if (!r.pending) return r;
  const { pending, ...rest } = r;
  const charged = BigInt(pending.cumulative) > BigInt(r.charged) ? pending.cumulative : r.charged;
  return { ...rest, charged, version: r.version + 1, at: now };
}

/** The upstream failed: the pending is released, nothing charged (the signed voucher is kept: it claims no more than charged). */
export function released(r: ChannelRecord, now: number): ChannelRecord {
  if (!r.pending) return r;
  const { pending: _pending, ...rest } = r;
  return { ...rest, version: r.version + 1, at: now };
}

/** A record with its on-chain balance as read after a deposit or a claim (never lowered below what is charged). */
export function withBalance(r: ChannelRecord, balance: bigint, totalClaimed: bigint, now: number): ChannelRecord {
  return { ...r, balance: balance.toString(), totalClaimed: totalClaimed.toString(), version: r.version + 1, at: now };
}

/** Whether a pending write-ahead is still its server's to finish: its boot live and its bound not passed. */
export async function pendingLive(p: PendingVoucher, live: (boot: string) => boolean | Promise<boolean>, now: number): Promise<boolean> {
  if (now > p.until) return false;
  return live(p.boot);
}

/** A dead server's pending, resolved as the top of this file says: committed (the voucher kept, at most one serve). */
export function resolvedPending(r: ChannelRecord, now: number): ChannelRecord {
  return committed(r, now);
}

/** What is still spendable on the channel: the balance minus what is accepted (charged, or pending). */
export function headroom(r: Pick<ChannelRecord, 'balance' | 'charged' | 'pending'>): bigint {
  const accepted = r.pending && BigInt(r.pending.cumulative) > BigInt(r.charged) ? BigInt(r.pending.cumulative) : BigInt(r.charged);
  const left = BigInt(r.balance) - accepted;
  return left > 0n ? left : 0n;
}

/** The payer a record's vouchers are signed for. */
export function payerOf(r: ChannelRecord): Address {
  return r.config.payer;
}

/**
 * A claim transaction mined with a row claiming up to `claimedTo`: the channel's `totalClaimed` is at least that now
 * (a row at or below the chain's total is skipped by the contract, so the total never falls).
 */
export function withClaimed(r: ChannelRecord, claimedTo: bigint, now: number): ChannelRecord {
  if (claimedTo <= BigInt(r.totalClaimed)) return r;
  return { ...r, totalClaimed: claimedTo.toString(), version: r.version + 1, at: now };
}

/**
 * The chain's view of the channel as read after a withdrawal or refund event: its balance (which may have fallen:
 * a finalized withdrawal), its claimed total (never lowered) and its pending withdrawal. Unchanged: the record as is.
 */
export function withChainState(r: ChannelRecord, chain: { balance: bigint; totalClaimed: bigint; withdrawRequestedAt: number; refundNonce: bigint }, now: number): ChannelRecord {
  const totalClaimed = chain.totalClaimed > BigInt(r.totalClaimed) ? chain.totalClaimed.toString() : r.totalClaimed;
  const same = r.balance === chain.balance.toString() && r.totalClaimed === totalClaimed && r.withdrawRequestedAt === chain.withdrawRequestedAt && r.refundNonce === chain.refundNonce.toString();
  if (same) return r;
  return { ...r, balance: chain.balance.toString(), totalClaimed, withdrawRequestedAt: chain.withdrawRequestedAt, refundNonce: chain.refundNonce.toString(), version: r.version + 1, at: now };
}

/** Accepted and not yet claimed on chain: what the merchant would lose if the channel emptied now. */
export function exposureOf(r: Pick<ChannelRecord, 'charged' | 'totalClaimed'>): bigint {
  const e = BigInt(r.charged) - BigInt(r.totalClaimed);
  return e > 0n ? e : 0n;
}

/** Unix seconds a pending withdrawal of the channel can be finalized, if one is pending. */
export function withdrawFinalizableAt(r: Pick<ChannelRecord, 'withdrawRequestedAt' | 'config'>): number | undefined {
  return withdrawDeadline(r, Number(r.config.withdrawDelay));
}

/**
 * Whether a pending withdrawal is too near its finalization for another voucher to be accepted: one accepted now
 * might not be claimed before the payer takes the unclaimed escrow back. `marginSeconds` before the deadline, the
 * channel takes no more vouchers (the claim actors claim every one accepted before it).
 */
export function withdrawClosing(r: Pick<ChannelRecord, 'withdrawRequestedAt' | 'config'>, nowMs: number, marginSeconds: number): boolean {
  const deadline = withdrawFinalizableAt(r);
  return deadline !== undefined && nowMs / 1000 >= deadline - marginSeconds;
}

/** The channel held for the refund `id` (see {@link ChannelRecord.refunding}). */
export function withRefunding(r: ChannelRecord, id: string, now: number): ChannelRecord {
  return { ...r, refunding: { id, since: now }, version: r.version + 1, at: now };
}

/** The refund `id` ended: its hold released, the chain's view of the channel taken (if read). Not held by it: as is. */
export function refundEnded(r: ChannelRecord, id: string, chain: Parameters<typeof withChainState>[1] | undefined, now: number): ChannelRecord {
  if (r.refunding?.id !== id) return chain ? withChainState(r, chain, now) : r;
  const { refunding: _refunding, ...rest } = r;
  const released = { ...rest, version: r.version + 1, at: now };
  if (!chain) return released;
  const moved = withChainState(released, chain, now);
  return moved === released ? released : { ...moved, version: r.version + 1 };
}
