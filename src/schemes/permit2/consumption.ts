import type { Hex } from 'viem';
import { movedExactly, transferEvent } from '../erc20-transfers.ts';
import { rangesBelow } from '../log-ranges.ts';
import type { Consumption, ConsumptionReads, SettlementCall } from '../scheme.ts';
import { nonceBitmapAbi } from './abi.ts';
import { signedPermitOf } from './settlement-call.ts';

/**
 * Whether a Permit2 nonce was consumed by our settlement. The nonce's bit in `nonceBitmap(owner, nonce >> 8)` says
 * used. Permit2 logs no nonce, so the consuming transaction is recognised by what it ran: a Transfer of exactly the
 * amount from the payer to the payee is the candidate (logs searched newest first), and its transaction counts only
 * if it made exactly our settlement call and that call succeeded: sent straight to the exact-permit proxy with our
 * signed permit (`settle`, or `settleWithPermit` around it), or as one call of an `aggregate3` sent to the chain's
 * known Multicall3, owning a Transfer no other call of the batch could have logged. A bit set in the same block as an
 * unrelated Transfer of the same amount (the payer's other payment, with this nonce spent elsewhere or invalidated)
 * is not a settlement; neither is a call wrapped in a contract we cannot read, whose calldata need not be what it ran.
 */
export async function permit2Consumption(reads: ConsumptionReads, call: SettlementCall, nonce: bigint): Promise<Consumption> {
  const { client, search } = reads;
  const { expect } = call;
  const bit = 1n << (nonce & 0xffn);
  const head = await client.getBlockNumber({ cacheTime: 0 });
  const word = await client.readContract({ address: reads.chain.permit2, abi: nonceBitmapAbi, functionName: 'nonceBitmap', args: [expect.from, nonce >> 8n], blockNumber: head });
  if ((word & bit) === 0n) return { consumed: false };
  const seen = new Set<Hex>();
  for (const range of rangesBelow(head, search)) {
    const logs = await client.getLogs({ address: expect.token, event: transferEvent, args: { from: expect.from, to: expect.to }, ...range });
    for (const log of [...logs].reverse()) {
      if (log.args.value !== expect.value || !log.transactionHash || log.blockNumber === null || seen.has(log.transactionHash)) continue;
      seen.add(log.transactionHash);
      if (await ranOurCall(reads, call, log.transactionHash)) return { consumed: true, transaction: log.transactionHash, blockNumber: log.blockNumber };
    }
  }
  return { consumed: true, why: `the Permit2 nonce is used or invalidated, and no transaction in the last ${search.lookbackBlocks} blocks ran this settlement` };
}

/** The transaction ran exactly our settlement call, and that call succeeded with its own Transfer. */
async function ranOurCall(reads: ConsumptionReads, call: SettlementCall, hash: Hex): Promise<boolean> {
  const { client, chain } = reads;
  const [tx, receipt] = await Promise.all([client.getTransaction({ hash }), client.getTransactionReceipt({ hash })]);
  if (receipt.status !== 'success' || !tx.to) return false;
  const to = tx.to.toLowerCase();
  if (to === call.to.toLowerCase()) {
    const ours = signedPermitOf(call.data);
    return ours !== undefined && signedPermitOf(tx.input) === ours && movedExactly(receipt.logs, call.expect);
  }
  if (!chain.multicall || to !== chain.multicall.toLowerCase()) return false;
  return reads.settledBatchCalls(tx.input, receipt).some((c) => c.to.toLowerCase() === call.to.toLowerCase() && c.data.toLowerCase() === call.data.toLowerCase());
}
