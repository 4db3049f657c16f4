/**
 * A channel deposit as a settlement call: `deposit(config, amount, collector, collectorData)` sent to the settlement
 * contract, and the ERC-20 Transfer it must log (the payer's tokens to the ERC-3009 collector, which forwards them;
 * or, through Permit2, straight to the settlement contract). Read back from calldata for batch receipts.
 */
import { decodeFunctionData, encodeFunctionData, getAddress, type Address, type Hex } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS } from '../../chain/canonical.ts';
import type { SettlementCall } from '../scheme.ts';
import { batchSettlementAbi } from './abi.ts';
import { depositCallArgs } from './deposit-call.ts';
import type { DepositPayload } from './payload.ts';

export type DepositMethod = 'erc3009' | 'permit2';

/** The collector each method deposits through. */
export const COLLECTOR_OF: Readonly<Record<DepositMethod, Address>> = { erc3009: ERC3009_DEPOSIT_COLLECTOR_ADDRESS, permit2: PERMIT2_DEPOSIT_COLLECTOR_ADDRESS };

/** Where the payer's tokens go first: the ERC-3009 collector receives them; Permit2 sends them to the settlement contract. */
const FIRST_HOP: Readonly<Record<DepositMethod, Address>> = { erc3009: ERC3009_DEPOSIT_COLLECTOR_ADDRESS, permit2: BATCH_SETTLEMENT_ADDRESS };

/** The deposit call of `payload`. No log of its own tells it apart in a batch: two deposits of one payer and amount never share a batch. */
export function depositSettlementCall(payload: DepositPayload): SettlementCall {
  const method = payload.deposit.authorization.kind;
  const data = encodeFunctionData({ abi: batchSettlementAbi, functionName: 'deposit', args: depositCallArgs(payload) });
  return callOf(method, data, payload.config.token, payload.config.payer, payload.deposit.amount);
}

/** A deposit through `method`'s collector read back from its target and calldata; undefined for any other call. */
export function decodeDepositCall(method: DepositMethod, to: Address, data: Hex): SettlementCall | undefined {
  if (to.toLowerCase() !== BATCH_SETTLEMENT_ADDRESS.toLowerCase()) return undefined;
  try {
    const decoded = decodeFunctionData({ abi: batchSettlementAbi, data });
    if (decoded.functionName !== 'deposit') return undefined;
    const [config, amount, collector] = decoded.args;
    if (getAddress(collector) !== getAddress(COLLECTOR_OF[method])) return undefined;
    return callOf(method, data, config.token, config.payer, amount);
  } catch {
    return undefined;
  }
}

function callOf(method: DepositMethod, data: Hex, token: Address, payer: Address, amount: bigint): SettlementCall {
  return { to: BATCH_SETTLEMENT_ADDRESS, data, expect: { token, from: payer, to: FIRST_HOP[method], value: amount } };
}
