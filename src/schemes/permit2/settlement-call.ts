import { decodeFunctionData, encodeFunctionData, type Address, type Hex } from 'viem';
import type { Permit2Payload } from '../../protocol/x402/types.ts';
import type { SettlementCall } from '../scheme.ts';
import { proxySettlementAbi, settleAbi } from './abi.ts';

/**
 * The exact-permit proxy's `settle`, which pulls `permitted.amount` from the owner to `witness.to` via Permit2. It
 * carries no log of its own: Permit2 logs no nonce, so two such calls of one amount between the same two addresses
 * cannot be told apart in a receipt (they never share a batch).
 */
export function permit2SettlementCall(proxy: Address, payload: Permit2Payload): SettlementCall {
  const p = payload.permit2Authorization;
  const data = encodeFunctionData({
    abi: settleAbi,
    functionName: 'settle',
    args: [
      { permitted: { token: p.permitted.token, amount: BigInt(p.permitted.amount) }, nonce: BigInt(p.nonce), deadline: BigInt(p.deadline) },
      p.from,
      { to: p.witness.to, validAfter: BigInt(p.witness.validAfter) },
      payload.signature,
    ],
  });
  return { to: proxy, data, expect: { token: p.permitted.token, from: p.from, to: p.witness.to, value: BigInt(p.permitted.amount) } };
}

/** A proxy `settle` call read back from its calldata; undefined for any other call. */
export function decodePermit2Call(to: Address, data: Hex): SettlementCall | undefined {
  try {
    const { args } = decodeFunctionData({ abi: settleAbi, data });
    const [permit, owner, witness] = args;
    return { to, data, expect: { token: permit.permitted.token, from: owner, to: witness.to, value: permit.permitted.amount } };
  } catch {
    return undefined;
  }
}

/** The signed permit a proxy settlement call carries (whichever entry point), as one comparable string; else undefined. */
export function signedPermitOf(data: Hex): string | undefined {
  try {
    const call = decodeFunctionData({ abi: proxySettlementAbi, data });
    const [permit, owner, witness, signature] = call.functionName === 'settle' ? call.args : [call.args[1], call.args[2], call.args[3], call.args[4]];
    return [permit.permitted.token, permit.permitted.amount, permit.nonce, permit.deadline, owner, witness.to, witness.validAfter, signature].join('|').toLowerCase();
  } catch {
    return undefined;
  }
}
