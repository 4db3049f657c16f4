import { decodeFunctionData, encodeFunctionData, type Address, type Hex } from 'viem';
import { exactPermit2ProxySettleAbi } from '../chain/contracts/settlement-abis.ts';
import { stablecoinArtifact } from '../devnet/contracts/artifacts/index.ts';
import type { Eip3009Payload, Permit2Payload } from '../protocol/x402/types.ts';

/** Exactly the call a settlement makes; simulation runs this same call, so what passed is what is sent. */
export interface SettlementCall {
  to: Address;
  data: Hex;
  /** The ERC-20 Transfer a successful settlement must log. */
  expect: { token: Address; from: Address; to: Address; value: bigint };
  /** EIP-3009 only: the authorization it uses up, which the token logs as `AuthorizationUsed(authorizer, nonce)`. */
  authorization?: { authorizer: Address; nonce: Hex };
}

/**
 * The settlement functions alone, each once (the bytes-signature overload of `transferWithAuthorization`): viem
 * resolves overloads and hashes every function of the ABI it is given on each encode and decode.
 */
const transferWithAuthorizationAbi = stablecoinArtifact.abi.filter((item) => item.type === 'function' && item.name === 'transferWithAuthorization' && item.inputs.length === 7);
const settleAbi = exactPermit2ProxySettleAbi.filter((item) => item.type === 'function' && item.name === 'settle');
const settlementFunctions = [...transferWithAuthorizationAbi, ...settleAbi];

/** EIP-3009 `transferWithAuthorization` with the bytes signature (EOAs and ERC-1271 wallets alike). */
export function eip3009SettlementCall(asset: Address, payload: Eip3009Payload): SettlementCall {
  const a = payload.authorization;
  const data = encodeFunctionData({
    abi: transferWithAuthorizationAbi,
    functionName: 'transferWithAuthorization',
    args: [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, payload.signature],
  });
  return { to: asset, data, expect: { token: asset, from: a.from, to: a.to, value: BigInt(a.value) }, authorization: { authorizer: a.from, nonce: a.nonce } };
}

/** The exact-permit proxy's `settle`, which pulls `permitted.amount` from the owner to `witness.to` via Permit2. */
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


/** The settlement call `data` to `to` makes, read back from its calldata (what a batch transaction holds); else undefined. */
export function decodeSettlementCall(to: Address, data: Hex): SettlementCall | undefined {
  try {
    const { functionName, args } = decodeFunctionData({ abi: settlementFunctions, data });
    if (functionName === 'transferWithAuthorization' && args.length === 7) {
      const [from, payee, value, , , nonce] = args;
      return { to, data, expect: { token: to, from, to: payee, value }, authorization: { authorizer: from, nonce } };
    }
    if (functionName === 'settle') {
      const [permit, owner, witness] = args;
      return { to, data, expect: { token: permit.permitted.token, from: owner, to: witness.to, value: permit.permitted.amount } };
    }
  } catch {
    // not a settlement call
  }
  return undefined;
}
