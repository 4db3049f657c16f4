import { decodeFunctionData, decodeFunctionResult, encodeFunctionData, toEventSelector, type Address, type Hex, type Log, type TransactionReceipt } from 'viem';
import { multicallArtifact, stablecoinArtifact } from '../devnet/contracts/artifacts/index.ts';
import { decodeSettlementCall, type SettlementCall } from './settlement-call.ts';

/**
 * Several settlements in one transaction, through a Multicall3-compatible `aggregate3`. Pure: encoding the batch,
 * reading its simulation, and deciding from a receipt which of its calls settled.
 */

/** `aggregate3` over the calls: each may fail alone (what is sent), or none may (what gas is estimated for). */
export function aggregateCall(multicall: Address, calls: readonly SettlementCall[], allowFailure: boolean): { to: Address; data: Hex } {
  const data = encodeFunctionData({
    abi: multicallArtifact.abi,
    functionName: 'aggregate3',
    args: [calls.map((c) => ({ target: c.to, allowFailure, callData: c.data }))],
  });
  return { to: multicall, data };
}

/** Per call, whether it succeeded, from what `aggregate3` returned. */
export function aggregateResults(returned: Hex): boolean[] {
  const results = decodeFunctionResult({ abi: multicallArtifact.abi, functionName: 'aggregate3', data: returned });
  return results.map((r) => r.success);
}

/** The settlement calls a batch transaction makes, in order, read back from its own calldata. */
export function callsOfBatch(data: Hex): Array<SettlementCall | undefined> {
  const { args } = decodeFunctionData({ abi: multicallArtifact.abi, data });
  return args[0].map((c) => decodeSettlementCall(c.target, c.callData));
}

const TRANSFER = toEventSelector('Transfer(address indexed from, address indexed to, uint256 value)');
const AUTHORIZATION_USED = toEventSelector(stablecoinArtifact.abi.find((item) => item.type === 'event' && item.name === 'AuthorizationUsed') as Parameters<typeof toEventSelector>[0]);
const topicAddress = (topic: Hex) => `0x${topic.slice(26)}` as Address;

/**
 * The ERC-20 Transfers among `logs` (read by their topics: both addresses indexed, the amount in the data). Decoded
 * here rather than by viem's parseEventLogs, which hashes the event's signature again for every log.
 */
export function loggedTransfers(logs: readonly Log[]): Array<{ token: Address; from: Address; to: Address; value: bigint }> {
  const out: Array<{ token: Address; from: Address; to: Address; value: bigint }> = [];
  for (const l of logs) {
    const [topic, from, to] = l.topics;
    if (topic !== TRANSFER || !from || !to || l.topics.length !== 3 || l.data.length !== 66) continue;
    out.push({ token: l.address, from: topicAddress(from), to: topicAddress(to), value: BigInt(l.data) });
  }
  return out;
}

/** `AuthorizationUsed(authorizer, nonce)` events among `logs`, as `token|authorizer|nonce` in lower case. */
function usedAuthorizations(logs: readonly Log[]): Set<string> {
  const out = new Set<string>();
  for (const l of logs) {
    const [topic, authorizer, nonce] = l.topics;
    if (topic === AUTHORIZATION_USED && authorizer && nonce && l.topics.length === 3) out.add(`${l.address}|${topicAddress(authorizer)}|${nonce}`.toLowerCase());
  }
  return out;
}

const transferKey = (e: { token: Address; from: Address; to: Address; value: bigint }) => `${e.token}|${e.from}|${e.to}|${e.value}`.toLowerCase();

/**
 * Two calls whose receipts would log the same Transfer and nothing else that tells them apart: Permit2 settlements
 * (the proxy logs no nonce) of one amount between the same two addresses. Such calls never share a batch.
 */
export function indistinguishable(a: SettlementCall, b: SettlementCall): boolean {
  return !a.authorization && !b.authorization && transferKey(a.expect) === transferKey(b.expect);
}

/**
 * Which calls of a mined batch settled, decided from its receipt alone. An EIP-3009 call settled when the token
 * logged `AuthorizationUsed` for its (authorizer, nonce), which no other call can use; a Permit2 call when its
 * Transfer is logged and no other call of the batch could have logged the same one. Either way each settled call
 * must own a Transfer of exactly its token, payer, payee and amount: Transfers are counted, never shared.
 */
export function settledCalls(receipt: TransactionReceipt, calls: ReadonlyArray<SettlementCall | undefined>): boolean[] {
  if (receipt.status !== 'success') return calls.map(() => false);
  const logged = new Map<string, number>();
  for (const t of loggedTransfers(receipt.logs)) {
    const key = transferKey(t);
    logged.set(key, (logged.get(key) ?? 0) + 1);
  }
  const used = usedAuthorizations(receipt.logs);
  const claims = calls.map((c) => {
    if (!c) return false;
    if (c.authorization) return used.has(`${c.expect.token}|${c.authorization.authorizer}|${c.authorization.nonce}`.toLowerCase());
    return calls.filter((o) => o !== undefined && indistinguishable(o, c)).length === 1 && (logged.get(transferKey(c.expect)) ?? 0) > 0;
  });
  return calls.map((c, i) => {
    if (!c || !claims[i]) return false;
    const key = transferKey(c.expect);
    const left = logged.get(key) ?? 0;
    if (left === 0) return false;
    logged.set(key, left - 1);
    return true;
  });
}
