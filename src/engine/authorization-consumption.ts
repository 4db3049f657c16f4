import type { Address } from 'viem';
import type { ExactEvmPayload, VerifyRequest } from '../protocol/x402/types.ts';
import { schemeOfPayload } from '../schemes/registry.ts';
import type { ChainReader, Consumption, ConsumptionSearch, PaymentScheme, SettlementCall } from '../schemes/scheme.ts';
import { callsOfBatch, settledCalls } from './settlement-batch.ts';

export type { ChainReader, Consumption, ConsumptionSearch } from '../schemes/scheme.ts';

/**
 * Whether a signed payment authorization was consumed on chain, by whoever sent it, and by which transaction.
 *
 * A settlement that failed or whose outcome is unknown (our transaction reverted, its call in a batch failed, the
 * node answered an error after taking it, simulation found the nonce used) may still have moved the money: someone
 * copied the call from the mempool and got in first, or our own earlier send landed. Each scheme reads it its own way
 * (its `consumption`: EIP-3009's `authorizationState` and `AuthorizationUsed`, Permit2's `nonceBitmap` and the
 * transaction that ran our call); the engine gives it the chain and the way to read a batch transaction's calls.
 *
 * Consumed with a matching Transfer: settled. Consumed without one (a cancelled authorization, or a use older than
 * the searched blocks): not settled, with the reason. Logs are searched newest first, over `lookbackBlocks` below
 * the head, in ranges of `chunkBlocks` (what public RPCs allow for eth_getLogs).
 */

/** What to look for: the payment's scheme, its authorization, and exactly the call (and Transfer) its settlement makes. */
export interface Authorization {
  scheme: PaymentScheme;
  payload: ExactEvmPayload;
  call: SettlementCall;
  /** The payer, whose authorization it is. */
  from: Address;
  /** The chain's Permit2, and its Multicall3 whose batches are read call by call. */
  chain: { permit2: Address; multicall?: Address };
}

/** The authorization a payment's settlement call consumes (`permit2`: the Permit2 contract of its chain). */
export function authorizationOf(request: VerifyRequest, call: SettlementCall, chain: { permit2: Address; multicall?: Address }): Authorization {
  const payload = request.paymentPayload.payload;
  return { scheme: schemeOfPayload(payload), payload, call, from: call.expect.from, chain };
}

/** Whether `auth` was consumed, and by which transaction, read from the chain `client` reaches. */
export async function consumptionOf(client: ChainReader, auth: Authorization, search: ConsumptionSearch): Promise<Consumption> {
  return auth.scheme.consumption({ client, chain: auth.chain, search, settledBatchCalls }, auth.payload, auth.call);
}

/** The calls of a batch transaction that settled, as its receipt shows (`settledCalls`); none when its calldata is no batch. */
function settledBatchCalls(input: Parameters<typeof callsOfBatch>[0], receipt: Parameters<typeof settledCalls>[0]): SettlementCall[] {
  let calls: ReturnType<typeof callsOfBatch>;
  try {
    calls = callsOfBatch(input);
  } catch {
    return [];
  }
  const settled = settledCalls(receipt, calls);
  return calls.filter((c, i): c is SettlementCall => c !== undefined && settled[i] === true);
}
