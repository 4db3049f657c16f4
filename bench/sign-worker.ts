/**
 * A worker of {@link SigningPool}: for each message, signs payments `from`..`to` (payment i by buyer i mod buyers)
 * with the official @x402/evm client scheme, and posts back their PAYMENT-SIGNATURE header values in order.
 */
import { parentPort } from 'node:worker_threads';
import type { Hex } from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { PaymentRequirements } from '../src/protocol/x402/types.ts';
import { encodePaymentSignatureHeader } from '../src/protocol/x402/headers.ts';
import { officialPayment } from '../test/helpers/payments.ts';

const accounts = new Map<Hex, PrivateKeyAccount>();
parentPort?.on('message', async ({ keys, requirements, from, to }: { keys: Hex[]; requirements: PaymentRequirements; from: number; to: number }) => {
  const headers: string[] = [];
  for (let i = from; i < to; i++) {
    const key = keys[i % keys.length] as Hex;
    let account = accounts.get(key);
    if (!account) {
      account = privateKeyToAccount(key);
      accounts.set(key, account);
    }
    headers.push(encodePaymentSignatureHeader(await officialPayment(account, requirements)));
  }
  parentPort?.postMessage(headers);
});
