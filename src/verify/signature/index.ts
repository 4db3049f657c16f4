/**
 * Signature verification for x402 `exact` payloads: EIP-712 digests (digest.ts, hashed by keccak.ts), native
 * secp256k1 recovery (recover.ts), jobs and the in-process path (jobs.ts), jobs as binary records (job-record.ts), and
 * the batched worker pool that ships them (pool.ts).
 *
 * The verifier answers "who signed this?". Whether that is the claimed payer (or, for a contract wallet, whether
 * ERC-1271 accepts the signature) is decided by the caller; `matchesSigner` compares addresses.
 */
export {
  domainSeparator,
  eip3009Digest,
  permit2DomainSeparator,
  permit2WitnessDigest,
  tryEip3009Digest,
  tryPermit2WitnessDigest,
  type Eip3009Authorization,
  type Eip3009Domain,
  type Permit2Domain,
  type Permit2WitnessMessage,
  type Uint256Like,
} from './digest.ts';
export { matchesSigner, recoverSigner, secp256k1Backend } from './recover.ts';
export { jobDigest, recoverJobSync, type Eip3009Job, type Permit2Authorization, type Permit2Job, type VerifyJob } from './jobs.ts';
export { SignatureVerifier, type SignatureVerifierOptions, type SignatureVerifierStats } from './pool.ts';
