/**
 * A verification job is one signed x402 payload in its wire shape, plus the EIP-712 domain to verify it under.
 * `recoverJobSync` is the whole computation (digest, then recovery); the worker runs exactly this, in batches.
 * Jobs are plain data (structured-clone safe): uint256 fields may be bigints, safe integers, or decimal strings.
 */
import type { Address, Hex } from 'viem';
import { PERMIT2_ADDRESS } from '../../chain/canonical.ts';
import { tryEip3009Digest, tryPermit2WitnessDigest, type Eip3009Authorization, type Eip3009Domain, type Uint256Like } from './digest.ts';
import { recoverSigner } from './recover.ts';

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

/** The EIP-712 digest a job's signature must be over, or undefined when the job is malformed. Never throws. */
export function jobDigest(job: VerifyJob): Uint8Array | undefined {
  if (job === null || typeof job !== 'object') return undefined;
  if (job.kind === 'eip3009') return tryEip3009Digest(job.domain, job.authorization);
  if (job.kind === 'permit2') {
    const { domain, permit } = job;
    if (domain === null || typeof domain !== 'object' || permit === null || typeof permit !== 'object') return undefined;
    const { permitted, witness } = permit;
    if (permitted === null || typeof permitted !== 'object' || witness === null || typeof witness !== 'object') return undefined;
    return tryPermit2WitnessDigest(
      { chainId: domain.chainId, verifyingContract: domain.verifyingContract ?? PERMIT2_ADDRESS },
      {
        token: permitted.token,
        amount: permitted.amount,
        spender: permit.spender,
        nonce: permit.nonce,
        deadline: permit.deadline,
        witnessTo: witness.to,
        witnessValidAfter: witness.validAfter,
      },
    );
  }
  return undefined;
}

/**
 * The address that signed the job's message (checksummed), or undefined when the job or its signature is malformed
 * or not acceptable (bad v, high s, no point). Never throws. Comparing with the claimed signer is the caller's job
 * (see `matchesSigner`; a contract wallet needs ERC-1271 instead).
 */
export function recoverJobSync(job: VerifyJob): Address | undefined {
  try {
    const digest = jobDigest(job);
    return digest === undefined ? undefined : recoverSigner(digest, job.signature);
  } catch {
    return undefined; // only reachable through exotic inputs (e.g. getters that throw); keep the contract.
  }
}

/** `recoverJobSync` over a batch, in order. */
export function recoverBatchSync(jobs: readonly VerifyJob[]): (Address | undefined)[] {
  const out = new Array<Address | undefined>(jobs.length);
  for (let i = 0; i < jobs.length; i++) out[i] = recoverJobSync(jobs[i] as VerifyJob);
  return out;
}
