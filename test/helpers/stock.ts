import { x402Client } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { erc20Abi, parseEther, toHex, type Address, type LocalAccount } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { NetworkEntry } from '../../src/chain/manifest.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { clientsFor, freshAccount } from './devnet.ts';

/** A brand-new key with native gas on the chain: a relayer or a stock desk of its own for one test's gateway. */
export async function gassedKey(n: NetworkEntry, eth = '10'): Promise<`0x${string}`> {
  const key = generatePrivateKey();
  await rpcCall(n.rpcUrl, 'anvil_setBalance', [privateKeyToAccount(key).address, toHex(parseEther(eth))]);
  return key;
}

/**
 * The official x402 client, unchanged, paying as `payer`. `beforeRetry` runs when the 402 has arrived and before
 * the paid retry goes out (a test moves the market there).
 */
export function officialBuyer(payer: LocalAccount, beforeRetry?: () => Promise<void>): typeof fetch {
  const client = registerExactEvmScheme(x402Client.fromConfig({ schemes: [], spendControls: false }), { signer: payer });
  const inner: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    if (res.status === 402 && beforeRetry) await beforeRetry();
    return res;
  };
  return wrapFetchWithPayment(inner, client);
}

export async function tokenBalance(n: NetworkEntry, token: Address, who: Address): Promise<bigint> {
  const { pub } = clientsFor(n, freshAccount());
  return pub.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [who] });
}
