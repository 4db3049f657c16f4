import type { Address, Hex } from 'viem';
import { movedExactly } from '../erc20-transfers.ts';
import { rangesBelow } from '../log-ranges.ts';
import type { Consumption, ConsumptionReads, ExpectedTransfer } from '../scheme.ts';
import { authorizationStateAbi, authorizationUsedEvent } from './abi.ts';

/**
 * Whether an EIP-3009 authorization was consumed: `authorizationState(from, nonce)` says used; the token's
 * `AuthorizationUsed(from, nonce)` log names the transaction (logs searched newest first), and its receipt must log
 * the Transfer of exactly the amount from the payer to the payee. Used without such a Transfer (a cancelled
 * authorization, or a use older than the searched blocks) is consumed, with the reason.
 */
export async function eip3009Consumption(reads: ConsumptionReads, expect: ExpectedTransfer, nonce: Hex): Promise<Consumption> {
  const { client, search } = reads;
  const token: Address = expect.token;
  const head = await client.getBlockNumber({ cacheTime: 0 });
  const used = await client.readContract({ address: token, abi: authorizationStateAbi, functionName: 'authorizationState', args: [expect.from, nonce], blockNumber: head });
  if (!used) return { consumed: false };
  for (const range of rangesBelow(head, search)) {
    const logs = await client.getLogs({ address: token, event: authorizationUsedEvent, args: { authorizer: expect.from, nonce }, ...range });
    for (const log of [...logs].reverse()) {
      if (!log.transactionHash || log.blockNumber === null) continue;
      const receipt = await client.getTransactionReceipt({ hash: log.transactionHash });
      if (receipt.status === 'success' && movedExactly(receipt.logs, expect)) return { consumed: true, transaction: log.transactionHash, blockNumber: log.blockNumber };
      return { consumed: true, why: `the authorization was used by ${log.transactionHash}, which did not move ${expect.value} from the payer to the payee` };
    }
  }
  return { consumed: true, why: `the authorization is used or cancelled, and no use of it in the last ${search.lookbackBlocks} blocks moved the amount to the payee` };
}
