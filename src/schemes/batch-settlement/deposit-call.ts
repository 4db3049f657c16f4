/**
 * What a deposit's signatures cover and the `deposit(config, amount, collector, collectorData)` call that spends
 * them: the typed data the payer signed (so a verifier can recover the signer) and the call's arguments.
 */
import { getAddress, type Hex } from 'viem';
import { ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS } from '../../chain/canonical.ts';
import type { ChannelConfig } from './channel-config.ts';
import { depositWitnessTypes, erc3009CollectorData, erc3009DepositNonce, permit2CollectorData } from './collector-data.ts';
import type { DepositPayload, Erc3009DepositAuthorization, Permit2DepositAuthorization } from './payload.ts';

export const receiveWithAuthorizationTypes = {
  ReceiveWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

/** The ERC-3009 `ReceiveWithAuthorization` a deposit's payer signed: to the ERC-3009 collector, nonce bound to the channel. */
export function erc3009DepositTypedData(payload: DepositPayload & { deposit: { authorization: Erc3009DepositAuthorization } }, token: { name: string; version: string }, chainId: number) {
  const auth = payload.deposit.authorization;
  return {
    domain: { name: token.name, version: token.version, chainId, verifyingContract: getAddress(payload.config.token) },
    types: receiveWithAuthorizationTypes,
    primaryType: 'ReceiveWithAuthorization' as const,
    message: {
      from: getAddress(payload.config.payer),
      to: ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
      value: payload.deposit.amount,
      validAfter: auth.validAfter,
      validBefore: auth.validBefore,
      nonce: erc3009DepositNonce(payload.voucher.channelId, auth.salt),
    },
  };
}

/** The Permit2 `PermitWitnessTransferFrom` a deposit's payer signed (spender: the Permit2 collector). */
export function permit2DepositTypedData(auth: Permit2DepositAuthorization, chainId: number) {
  return {
    domain: { name: 'Permit2', chainId, verifyingContract: PERMIT2_ADDRESS },
    types: depositWitnessTypes,
    primaryType: 'PermitWitnessTransferFrom' as const,
    message: {
      permitted: { token: getAddress(auth.token), amount: auth.amount },
      spender: getAddress(auth.spender),
      nonce: auth.nonce,
      deadline: auth.deadline,
      witness: { channelId: auth.witnessChannelId },
    },
  };
}

/** The arguments of the settlement contract's `deposit` for `payload` (an EIP-2612 permit of Permit2 may ride along). */
export function depositCallArgs(payload: DepositPayload, eip2612Permit: Hex = '0x'): readonly [ChannelConfig, bigint, `0x${string}`, Hex] {
  const auth = payload.deposit.authorization;
  if (auth.kind === 'erc3009') {
    return [{ ...payload.config }, payload.deposit.amount, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, erc3009CollectorData(auth)] as const;
  }
  return [{ ...payload.config }, payload.deposit.amount, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, permit2CollectorData(auth, eip2612Permit)] as const;
}
