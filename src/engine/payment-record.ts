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
