/**
 * A verification job as a fixed-size binary record: everything about a job that needs parsing (hex, decimal strings,
 * the domain) is done once by `encodeJob`, and what is left for `recoverRecord` is hashing and recovery. The pool
 * encodes jobs on the calling thread and ships whole batches of records to its workers as one byte array, so nothing
 * is structured-cloned object by object and a worker allocates next to nothing per job; a malformed job is answered
 * without reaching a worker.
 *
 * Layout (`JOB_RECORD_BYTES` = 352):
 *
 *   [0]          kind: 1 EIP-3009, 2 Permit2
 *   [1]          recovery id (0 or 1)
 *   [2, 32)      zero
 *   [32, 64)     the EIP-712 domain separator
 *   [64, 128)    r ‖ s (s taken out of the EIP-2098 compact form; high s already refused)
 *   [128, 352)   the message's ABI words (digest.ts): 6 for EIP-3009, 7 for Permit2
 *
 * Answers are checksummed addresses as 42 ASCII bytes (`ADDRESS_ASCII_BYTES`), or 42 zero bytes when no key recovers.
 */
import type { Address } from 'viem';
import { PERMIT2_ADDRESS } from '../../chain/canonical.ts';
import { eip3009DigestOfWords, permit2DigestOfWords, tryDomainSeparator, tryPermit2DomainSeparator, writeEip3009Message, writePermit2Message } from './digest.ts';
import type { VerifyJob } from './jobs.ts';
import { ADDRESS_ASCII_BYTES, recoverAddressAscii, writeSignature } from './recover.ts';

export const JOB_RECORD_BYTES = 352;
export { ADDRESS_ASCII_BYTES };

const KIND_EIP3009 = 1;
const KIND_PERMIT2 = 2;
const SEPARATOR = 32;
const SIGNATURE = 64;
const MESSAGE = 128;

/**
 * Writes `job` as a record at `out[offset..offset + JOB_RECORD_BYTES)` (`view` is a DataView of `out`'s buffer).
 * Returns false when the job, its domain, its message or its signature is malformed or not acceptable (bad v, high s,
 * wrong length), which is exactly when recovery would answer undefined before touching the curve. Never throws.
 */
export function encodeJob(job: VerifyJob, out: Uint8Array, view: DataView, offset: number): boolean {
  try {
    if (!encodeMessage(job, out, view, offset)) return false;
    const recid = writeSignature(job.signature, out, offset + SIGNATURE);
    if (recid < 0) return false;
    out[offset + 1] = recid;
    return true;
  } catch {
    return false; // only reachable through exotic inputs (e.g. getters that throw); keep the contract.
  }
}

/**
 * Writes a record's kind, domain separator and message words, not its signature (for `recordDigest`, which a
 * contract wallet's signature of any shape needs). False when the job, its domain or its message is malformed.
 */
export function encodeMessage(job: VerifyJob, out: Uint8Array, view: DataView, offset: number): boolean {
  if (job === null || typeof job !== 'object') return false;
  let separator: Uint8Array | undefined;
  if (job.kind === 'eip3009') {
    separator = tryDomainSeparator(job.domain);
    if (separator === undefined || !writeEip3009Message(job.authorization, out, view, offset + MESSAGE)) return false;
    out[offset] = KIND_EIP3009;
  } else if (job.kind === 'permit2') {
    const { domain, permit } = job;
    if (domain === null || typeof domain !== 'object' || permit === null || typeof permit !== 'object') return false;
    const { permitted, witness } = permit;
    if (permitted === null || typeof permitted !== 'object' || witness === null || typeof witness !== 'object') return false;
    separator = tryPermit2DomainSeparator({ chainId: domain.chainId, verifyingContract: domain.verifyingContract ?? PERMIT2_ADDRESS });
    if (separator === undefined) return false;
    const message = {
      token: permitted.token,
      amount: permitted.amount,
      spender: permit.spender,
      nonce: permit.nonce,
      deadline: permit.deadline,
      witnessTo: witness.to,
      witnessValidAfter: witness.validAfter,
    };
    if (!writePermit2Message(message, out, view, offset + MESSAGE)) return false;
    out[offset] = KIND_PERMIT2;
  } else {
    return false;
  }
  out.fill(0, offset + 1, offset + SEPARATOR);
  out.set(separator, offset + SEPARATOR);
  return true;
}

/** The EIP-712 digest of the record at `records[offset..]`, written to `out[outOffset..]`; false for an unknown kind. */
export function recordDigest(records: Uint8Array, offset: number, out: Uint8Array, outOffset: number): boolean {
  const kind = records[offset];
  if (kind === KIND_EIP3009) eip3009DigestOfWords(records, offset + SEPARATOR, records, offset + MESSAGE, out, outOffset);
  else if (kind === KIND_PERMIT2) permit2DigestOfWords(records, offset + SEPARATOR, records, offset + MESSAGE, out, outOffset);
  else return false;
  return true;
}

const DIGEST = new Uint8Array(32);

/**
 * Recovers the signer of the record at `records[offset..]` and writes its checksummed address as 42 ASCII bytes at
 * `out[outOffset..]`; false (and `out` untouched) when no key recovers or the record is not one `encodeJob` writes.
 */
export function recoverRecord(records: Uint8Array, offset: number, out: Uint8Array, outOffset: number): boolean {
  const recid = records[offset + 1] as number;
  if (recid > 1 || !recordDigest(records, offset, DIGEST, 0)) return false;
  return recoverAddressAscii(DIGEST, records, offset + SIGNATURE, recid, out, outOffset);
}

/**
 * `recoverRecord` over `count` consecutive records, answered as one string of `count × 42` characters: record i's
 * address at `[42 i, 42 i + 42)`, or 42 NUL characters. `out` is scratch of at least `count × 42` bytes.
 */
export function recoverRecords(records: Uint8Array, count: number, out: Buffer): string {
  if (records.length < count * JOB_RECORD_BYTES || out.length < count * ADDRESS_ASCII_BYTES) throw new RangeError('recoverRecords: buffers too short');
  for (let i = 0; i < count; i++) {
    if (!recoverRecord(records, i * JOB_RECORD_BYTES, out, i * ADDRESS_ASCII_BYTES)) out.fill(0, i * ADDRESS_ASCII_BYTES, (i + 1) * ADDRESS_ASCII_BYTES);
  }
  return out.toString('latin1', 0, count * ADDRESS_ASCII_BYTES);
}

/** Answer i of a `recoverRecords` string: the address, or undefined. */
export function answerAt(answers: string, i: number): Address | undefined {
  const start = i * ADDRESS_ASCII_BYTES;
  return answers.charCodeAt(start) === 0x30 ? (answers.slice(start, start + ADDRESS_ASCII_BYTES) as Address) : undefined;
}
