import { bytesToHex, type Address, type LocalAccount } from 'viem';
import { randomBytes } from 'node:crypto';

export const transferWithAuthorizationTypes = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

export interface Authorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: `0x${string}`;
}

/** Signs an EIP-3009 TransferWithAuthorization the way a wallet would, independently of the service's own code. */
export async function signTransferAuthorization(
  signer: LocalAccount,
  domain: { name: string; version: string; chainId: number; verifyingContract: Address },
  auth: Omit<Authorization, 'nonce' | 'from'> & { nonce?: `0x${string}`; from?: Address },
): Promise<{ authorization: Authorization; signature: `0x${string}` }> {
  const authorization: Authorization = { from: signer.address, nonce: bytesToHex(randomBytes(32)), ...auth };
  const signature = await signer.signTypedData({ domain, types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization', message: authorization });
  return { authorization, signature };
}
