import type { Hex } from 'viem';
import type { SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import type { SignedTx } from '../tx/trail.ts';
import type { SettleReason } from '../verify/reasons.ts';

/** The durable record of one settlement, written at each step of its actor and before anything is broadcast. */
export interface PaymentRecord {
  /** The on-chain nonce key: one settlement per key, ever. */
  id: string;
  /** This attempt's claim on the key. */
  attempt: string;
  /**
   * The cluster node that started it (absent alone): whoever holds that node's lease finishes it, the node itself
   * after a restart or another once the lease expired (see `src/cluster/membership.ts`).
   */
  node?: string;
  network: string;
  payer: string;
  /** Fingerprint of the signed payload: a repeat of the same payload gets the recorded answer. */
  fingerprint: string;
  request: VerifyRequest;
  /** The machine state at the last write. */
  state: string;
  /** Every signed version of the settlement transaction (replacements add one); the last is current. */
  txs: SignedTx[];
  /**
   * Set when the payment rides in a batch transaction, whose trail its `BatchRecord` holds (`txs` stays empty): the
   * batch, this payment's call in it, and the batch's current transaction. Written with the batch record and every
   * other member's record in one durable transaction, before the batch is first sent.
   */
  batch?: { id: string; index: number; tx: Hex };
  gas?: string;
  /**
   * A contract payer (ERC-1271): its code hash, and the code's turn this payment holds while the code has never
   * settled here (one payment at a time; released when the payment ends). See `revert-budget.ts`.
   */
  contract?: { codeHash: Hex; turn?: string };
  result?: SettleResponse;
  failure?: { reason: SettleReason; message: string };
  createdAt: number;
  updatedAt: number;
}

/** One batch transaction, however many payments ride in it: stored once, next to its members' records. */
export interface BatchRecord {
  id: string;
  network: string;
  /** The members' record ids, in call order. */
  members: string[];
  /** Every signed version of the batch transaction; the last is current. */
  txs: SignedTx[];
  /** The batch machine's state at the last write (absent in records written before batches were machines). */
  state?: string;
  createdAt: number;
  updatedAt: number;
}

/** The transaction a payment's settlement is in now: its own, or its batch's. */
export function currentTxOf(record: PaymentRecord): Hex | undefined {
  return record.batch?.tx ?? record.txs.at(-1)?.hash;
}

/** The settlement is over: nothing more will be sent for this record. */
export function isFinished(record: PaymentRecord): boolean {
  return record.state === 'settled' || record.state === 'failed';
}

/**
 * A failed payment that never sent anything (refused by simulation, or failed before its first broadcast, its claim
 * released): nothing of it can settle later, and a retry of it is a new payment, so its record is removed rather than
 * kept. Kept are the records exactly-once reads (settled, unfinished) and those of payments that sent a transaction.
 */
export function leavesNoRecord(record: PaymentRecord): boolean {
  return record.state === 'failed' && record.txs.length === 0 && record.batch === undefined;
}

/**
 * The order of a payment record's states, for writes that must never take it backwards (see
 * `src/store/record-order.ts`). A failure after the claim passes through `reconciling` and `releasing`; `stalled` is
 * `inFlight` given up for now (a restart resumes it there). Of the two ends, `settled` is above `failed`: what the
 * chain settled is never overwritten by a failure, while a failure found settled after all may be.
 */
export const PAYMENT_STATE_RANK: Readonly<Record<string, number>> = {
  claiming: 0,
  simulating: 1,
  broadcasting: 2,
  inFlight: 3,
  stalled: 3,
  reconciling: 4,
  releasing: 5,
  failed: 6,
  settled: 7,
};

/** The states of a batch record (written once it has a trail; `mined` above `failed`, as for payments). */
export const BATCH_STATE_RANK: Readonly<Record<string, number>> = {
  open: 0,
  closing: 0,
  simulating: 0,
  sending: 1,
  sent: 2,
  stalled: 2,
  dissolved: 3,
  failed: 4,
  mined: 5,
};

/** Ranks of unfinished records are below this; a finished record's rank is this plus its state's. */
export const FINISHED_RANK = 2 ** 40;
/** Room for every state's rank under one trail length. */
const STATES = 16;

/**
 * Where a record is in its life, as one number: finished records above every unfinished one, and below that the
 * trail length first, then the state. A trail only grows, so a record with more signed versions is newer whatever
 * its state (a payment resumed at `inFlight` from `reconciling` signs a replacement: it must be written); among
 * records of one trail, the state decides.
 */
export function lifeRank(stateRank: number, finished: boolean, trail: number): number {
  return finished ? FINISHED_RANK + stateRank : trail * STATES + stateRank;
}

/** A payment record's rank; compared only between records of one attempt (another attempt's claim orders it). */
export const paymentRecordOrder = {
  rank: (r: PaymentRecord): number => lifeRank(PAYMENT_STATE_RANK[r.state] ?? 0, isFinished(r), r.txs.length),
  series: (r: PaymentRecord): string => r.attempt,
};

/** A batch record's rank. */
export const batchRecordOrder = {
  rank: (b: BatchRecord): number => lifeRank(BATCH_STATE_RANK[b.state ?? ''] ?? 0, b.state === 'mined' || b.state === 'failed' || b.state === 'dissolved', b.txs.length),
};
