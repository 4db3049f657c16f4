import { randomBytes } from 'node:crypto';
import { hexToBigInt, bytesToHex, type Address, type LocalAccount } from 'viem';
import { PERMIT2_ADDRESS } from '../../src/chain/canonical.ts';
import { exactPermit2ProxyArtifact, permit2Artifact } from '../../src/devnet/contracts/artifacts/index.ts';

/**
 * The exact-permit proxy's whole ABI plus the errors of Permit2, which bubble up through `settle` unchanged: with it a
 * revert of a Permit2 settlement decodes by name (InvalidNonce, SignatureExpired, InvalidSigner, ...).
 */
export const exactPermit2ProxyAbi = [...exactPermit2ProxyArtifact.abi, ...permit2Artifact.abi.filter((item) => item.type === 'error')] as const;

/** The exact EIP-712 types of x402's Permit2 witness transfer (protocols.md section 3), written out independently. */
export const permitWitnessTypes = {
  PermitWitnessTransferFrom: [
    { name: 'permitted', type: 'TokenPermissions' },
    { name: 'spender', type: 'address' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
    { name: 'witness', type: 'Witness' },
  ],
  TokenPermissions: [
    { name: 'token', type: 'address' },
    { name: 'amount', type: 'uint256' },
  ],
  Witness: [
    { name: 'to', type: 'address' },
    { name: 'validAfter', type: 'uint256' },
  ],
} as const;

export interface WitnessPermit {
  permitted: { token: Address; amount: bigint };
  spender: Address;
  nonce: bigint;
  deadline: bigint;
  witness: { to: Address; validAfter: bigint };
}

export function randomNonce(): bigint {
  return hexToBigInt(bytesToHex(randomBytes(32)));
}

export async function signWitnessPermit(owner: LocalAccount, chainId: number, permit: WitnessPermit): Promise<`0x${string}`> {
  return owner.signTypedData({
    domain: { name: 'Permit2', chainId, verifyingContract: PERMIT2_ADDRESS },
    types: permitWitnessTypes,
    primaryType: 'PermitWitnessTransferFrom',
    message: permit,
  });
}

/** The proxy's `settle` arguments for a signed permit. */
export function settleArgs(owner: Address, p: WitnessPermit, signature: `0x${string}`) {
  return [{ permitted: p.permitted, nonce: p.nonce, deadline: p.deadline }, owner, p.witness, signature] as const;
}
