import { pad, type Address, type Hex } from 'viem';
import { functionCall } from '../../chain/function-call.ts';
import type { Eip3009Payload } from '../../protocol/x402/types.ts';
import type { SettlementCall } from '../scheme.ts';
import { AUTHORIZATION_USED_TOPIC, transferWithAuthorizationAbi } from './abi.ts';

const transferWithAuthorization = functionCall(transferWithAuthorizationAbi[0]);

/**
 * The call each payload encoded last, by payload object: verification builds it, and the settled batch member's check
 * builds it again from the same payload. Kept only while every field it was made from is the same.
 */
const encoded = new WeakMap<Eip3009Payload, { fields: string; call: SettlementCall }>();

const fieldsOf = (asset: Address, p: Eip3009Payload): string => {
  const a = p.authorization;
  return `${asset}|${a.from}|${a.to}|${a.value}|${a.validAfter}|${a.validBefore}|${a.nonce}|${p.signature}`;
};

/** EIP-3009 `transferWithAuthorization` with the bytes signature (EOAs and ERC-1271 wallets alike), sent to the asset. */
export function eip3009SettlementCall(asset: Address, payload: Eip3009Payload): SettlementCall {
  const fields = fieldsOf(asset, payload);
  const hit = encoded.get(payload);
  if (hit?.fields === fields) return hit.call;
  const a = payload.authorization;
  const data = transferWithAuthorization.encode([a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, payload.signature]);
  const call = callOf(asset, data, a.from, a.to, BigInt(a.value), a.nonce);
  encoded.set(payload, { fields, call });
  return call;
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
