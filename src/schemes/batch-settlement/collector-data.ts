import { encodeAbiParameters, keccak256, type Hex } from 'viem';

/**
 * The nonce of a deposit's EIP-3009 `ReceiveWithAuthorization`: `keccak256(abi.encode(channelId, salt))`. The
 * ERC-3009 collector derives it the same way, so a signed deposit can fund that channel and no other.
 */
export function erc3009DepositNonce(channelId: Hex, salt: Hex | bigint): Hex {
  return keccak256(encodeAbiParameters([{ type: 'bytes32' }, { type: 'uint256' }], [channelId, BigInt(salt)]));
}

/** `collectorData` of the ERC-3009 collector: `abi.encode(validAfter, validBefore, salt, signature)`. */
export function erc3009CollectorData(auth: { validAfter: bigint; validBefore: bigint; salt: Hex | bigint; signature: Hex }): Hex {
  return encodeAbiParameters([{ type: 'uint256' }, { type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }], [auth.validAfter, auth.validBefore, BigInt(auth.salt), auth.signature]);
}

/**
 * `collectorData` of the Permit2 collector: `abi.encode(nonce, deadline, signature, eip2612Permit)`, where the last is
 * empty or `abi.encode(value, deadline, v, r, s)` of an EIP-2612 approval of Permit2 the collector tries first.
 */
export function permit2CollectorData(auth: { nonce: bigint; deadline: bigint; signature: Hex }, eip2612Permit: Hex = '0x'): Hex {
  return encodeAbiParameters([{ type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }, { type: 'bytes' }], [auth.nonce, auth.deadline, auth.signature, eip2612Permit]);
}

/** Permit2's witness type of a channel deposit, signed with spender = the Permit2 deposit collector. */
export const depositWitnessTypes = {
  PermitWitnessTransferFrom: [
    { name: 'permitted', type: 'TokenPermissions' },
    { name: 'spender', type: 'address' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
    { name: 'witness', type: 'DepositWitness' },
  ],
  TokenPermissions: [
    { name: 'token', type: 'address' },
    { name: 'amount', type: 'uint256' },
  ],
  DepositWitness: [{ name: 'channelId', type: 'bytes32' }],
} as const;
