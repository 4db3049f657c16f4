import { pad, type Address, type Hex } from 'viem';
import { functionCall } from '../../chain/function-call.ts';
import type { Eip3009Payload } from '../../protocol/x402/types.ts';
import type { SettlementCall } from '../scheme.ts';
import { AUTHORIZATION_USED_TOPIC, transferWithAuthorizationAbi } from './abi.ts';

const transferWithAuthorization = functionCall(transferWithAuthorizationAbi[0]);

/** EIP-3009 `transferWithAuthorization` with the bytes signature (EOAs and ERC-1271 wallets alike), sent to the asset. */
export function eip3009SettlementCall(asset: Address, payload: Eip3009Payload): SettlementCall {
  const a = payload.authorization;
  const data = transferWithAuthorization.encode([a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, payload.signature]);
  return callOf(asset, data, a.from, a.to, BigInt(a.value), a.nonce);
}

/** An EIP-3009 settlement call read back from its calldata; undefined for any other call. */
export function decodeEip3009Call(to: Address, data: Hex): SettlementCall | undefined {
  const args = transferWithAuthorization.decode(data);
  if (!args) return undefined;
  const [from, payee, value, , , nonce] = args;
  return callOf(to, data, from, payee, value, nonce);
}

/** The call, the Transfer it must log, and the token's `AuthorizationUsed(from, nonce)`, which only this call can log. */
function callOf(asset: Address, data: Hex, from: Address, to: Address, value: bigint, nonce: Hex): SettlementCall {
  return {
    to: asset,
    data,
    expect: { token: asset, from, to, value },
    ownLog: { emitter: asset, topics: [AUTHORIZATION_USED_TOPIC, pad(from, { size: 32 }), nonce] },
  };
}
