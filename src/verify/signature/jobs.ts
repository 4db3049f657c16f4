/**
 * A verification job is one signed x402 payload in its wire shape, plus the EIP-712 domain to verify it under.
 * `recoverJobSync` is the whole computation (digest, then recovery); the pool runs exactly this, in batches.
 * Jobs are plain data: uint256 fields may be bigints, safe integers, or decimal strings.
 */
import type { Address, Hex } from 'viem';
import type { Eip3009Authorization, Eip3009Domain, Uint256Like } from './digest.ts';
import { ADDRESS_ASCII_BYTES, answerAt, encodeJob, encodeMessage, JOB_RECORD_BYTES, recordDigest, recoverRecords } from './job-record.ts';

/** x402 `exact` EIP-3009: `payload.authorization` and `payload.signature`, domain from `extra.{name,version}`, chain and asset. */
export interface Eip3009Job {
  kind: 'eip3009';
  domain: Eip3009Domain;
  authorization: Eip3009Authorization;
  signature: Hex;
}

/** x402 `exact` Permit2: `payload.permit2Authorization` (its `from` is not part of the signed message and is ignored). */
export interface Permit2Authorization {
  from?: Address;
  permitted: { token: Address; amount: Uint256Like };
  spender: Address;
  nonce: Uint256Like;
  deadline: Uint256Like;
  witness: { to: Address; validAfter: Uint256Like };
}

export interface Permit2Job {
  kind: 'permit2';
  /** `verifyingContract` defaults to the canonical Permit2 address. */
  domain: { chainId: Uint256Like; verifyingContract?: Address };
  permit: Permit2Authorization;
  signature: Hex;
}

export type VerifyJob = Eip3009Job | Permit2Job;

const RECORD = new Uint8Array(JOB_RECORD_BYTES);
const RECORD_VIEW = new DataView(RECORD.buffer);
const ANSWER = Buffer.alloc(ADDRESS_ASCII_BYTES);

/** The EIP-712 digest a job's signature must be over, or undefined when the job is malformed. Never throws. */
export function jobDigest(job: VerifyJob): Uint8Array | undefined {
  try {
    if (!encodeMessage(job, RECORD, RECORD_VIEW, 0)) return undefined;
  } catch {
    return undefined; // only reachable through exotic inputs (e.g. getters that throw)
  }
  const digest = new Uint8Array(32);
  return recordDigest(RECORD, 0, digest, 0) ? digest : undefined;
}

/**
 * The address that signed the job's message (checksummed), or undefined when the job or its signature is malformed
 * or not acceptable (bad v, high s, no point). Never throws. Comparing with the claimed signer is the caller's job
 * (see `matchesSigner`; a contract wallet needs ERC-1271 instead). The pool computes exactly this, in two halves:
 * `encodeJob` on the calling thread, `recoverRecord` in a worker.
 */
export function recoverJobSync(job: VerifyJob): Address | undefined {
  if (!encodeJob(job, RECORD, RECORD_VIEW, 0)) return undefined;
  return answerAt(recoverRecords(RECORD, 1, ANSWER), 0);
}
