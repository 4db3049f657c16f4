import { TransactionReceiptNotFoundError, WaitForTransactionReceiptTimeoutError, type Chain, type Hash, type PublicClient, type TransactionReceipt, type Transport } from 'viem';

/** How long a devnet transaction's receipt is asked for before the start gives up: a loaded machine mines slowly. */
export const DEVNET_RECEIPT_TIMEOUT_MS = 180_000;

/**
 * The receipt of `hash`, asked for directly every `pollMs` until the chain has it (a failed read is asked again), for
 * at most `timeoutMs`. viem's `waitForTransactionReceipt` reads the receipt again only when it sees a new block: on an
 * automining chain a head read just before the receipt is stored (a loaded machine widens that gap) leaves it waiting
 * for a block nobody mines, until its timeout.
 */
export async function receiptOf(client: PublicClient<Transport, Chain>, hash: Hash, opts: { timeoutMs?: number; pollMs?: number } = {}): Promise<TransactionReceipt> {
  const deadline = Date.now() + (opts.timeoutMs ?? DEVNET_RECEIPT_TIMEOUT_MS);
  for (;;) {
    let failure: unknown;
    try {
      return await client.getTransactionReceipt({ hash });
    } catch (err) {
      failure = err;
    }
    if (Date.now() > deadline) throw failure instanceof TransactionReceiptNotFoundError ? new WaitForTransactionReceiptTimeoutError({ hash }) : failure;
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 20));
  }
}
