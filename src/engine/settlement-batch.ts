import { decodeFunctionResult, parseAbi, type Address, type Hex, type Log, type TransactionReceipt } from 'viem';
import { functionCall } from '../chain/function-call.ts';
import { loggedTransfers } from '../schemes/erc20-transfers.ts';
import { decodeSettlementCall } from '../schemes/registry.ts';
import type { SettlementCall } from '../schemes/scheme.ts';

/**
 * Several settlements in one transaction, through a Multicall3-compatible `aggregate3`. Pure: encoding the batch,
 * reading its simulation, and deciding from a receipt which of its calls settled.
 */

/** Multicall3's `aggregate3(Call3[])`, the one function a batch calls. */
const aggregate3Abi = parseAbi([
  'struct Call3 { address target; bool allowFailure; bytes callData; }',
  'struct Result { bool success; bytes returnData; }',
  'function aggregate3(Call3[] calls) payable returns (Result[] returnData)',
]);

const aggregate3 = functionCall(aggregate3Abi[0]);

/** `aggregate3` over the calls: each may fail alone (what is sent), or none may (what gas is estimated for). */
export function aggregateCall(multicall: Address, calls: readonly SettlementCall[], allowFailure: boolean): { to: Address; data: Hex } {
  const data = aggregate3.encode([calls.map((c) => ({ target: c.to, allowFailure, callData: c.data }))]);
  return { to: multicall, data };
}

/** Per call, whether it succeeded, from what `aggregate3` returned. */
export function aggregateResults(returned: Hex): boolean[] {
  const results = decodeFunctionResult({ abi: aggregate3Abi, functionName: 'aggregate3', data: returned });
  return results.map((r) => r.success);
}

/** The settlement calls a batch transaction makes, in order, read back from its own calldata. */
export function callsOfBatch(data: Hex): Array<SettlementCall | undefined> {
  const args = aggregate3.decode(data);
  if (!args) throw new TypeError('not an aggregate3 call');
  return args[0].map((c) => decodeSettlementCall(c.target, c.callData));
}

/** Every log of `logs`, as `emitter|topic|topic...` in lower case. */
function logKeys(logs: readonly Log[]): Set<string> {
  return new Set(logs.map((l) => [l.address, ...l.topics].join('|').toLowerCase()));
}

const ownLogKey = (log: NonNullable<SettlementCall['ownLog']>) => [log.emitter, ...log.topics].join('|').toLowerCase();

const transferKey = (e: { token: Address; from: Address; to: Address; value: bigint }) => `${e.token}|${e.from}|${e.to}|${e.value}`.toLowerCase();

/**
 * Two calls whose receipts would log the same Transfer and nothing else that tells them apart: calls without a log
 * of their own (Permit2 settlements: the proxy logs no nonce) of one amount between the same two addresses. Such
 * calls never share a batch.
 */
export function indistinguishable(a: SettlementCall, b: SettlementCall): boolean {
  return !a.ownLog && !b.ownLog && transferKey(a.expect) === transferKey(b.expect);
}

/**
 * Which calls of a mined batch settled, decided from its receipt alone. A call with a log of its own (EIP-3009: the
 * token's `AuthorizationUsed` for its authorizer and nonce, which no other call can use) settled when that log is in
 * the receipt; a call without one (Permit2) when its Transfer is logged and no other call of the batch could have
 * logged the same one. Either way each settled call
 * must own a Transfer of exactly its token, payer, payee and amount: Transfers are counted, never shared.
 */
export function settledCalls(receipt: TransactionReceipt, calls: ReadonlyArray<SettlementCall | undefined>): boolean[] {
  if (receipt.status !== 'success') return calls.map(() => false);
  const logged = new Map<string, number>();
  for (const t of loggedTransfers(receipt.logs)) {
    const key = transferKey(t);
    logged.set(key, (logged.get(key) ?? 0) + 1);
  }
  const own = logKeys(receipt.logs);
  const claims = calls.map((c) => {
    if (!c) return false;
    if (c.ownLog) return own.has(ownLogKey(c.ownLog));
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
