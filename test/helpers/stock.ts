import { x402Client } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { erc20Abi, parseEther, toHex, type Account, type Address, type LocalAccount, type TransactionReceipt } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { stablecoinArtifact } from '../../src/devnet/contracts/artifacts/index.ts';
import { uniswapArtifacts } from '../../src/devnet/contracts/uniswap.ts';
import type { NetworkEntry, StockInfo } from '../../src/chain/network-types.ts';
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

/**
 * A trader (a tester, minter of stablecoin B) buys `stock` for `amount` stablecoin B atomic units on its pool: the
 * price moves against the next buyer. Returns the swap's receipt.
 */
export async function buyInPool(n: NetworkEntry, trader: Account, stock: StockInfo, amount: bigint): Promise<TransactionReceipt> {
  const { pub, wallet } = clientsFor(n, trader);
  if (!n.uniswap) throw new Error('the network has no Uniswap router');
  await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'mint', args: [trader.address, amount] }) });
  await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'approve', args: [n.uniswap.router, amount] }) });
  const block = await pub.getBlock();
  const hash = await wallet.writeContract({
    address: n.uniswap.router,
    abi: uniswapArtifacts.router.abi,
    functionName: 'exactInputSingle',
    args: [
      {
        tokenIn: n.stablecoin.address,
        tokenOut: stock.address,
        fee: stock.fee,
        recipient: trader.address,
        deadline: block.timestamp + 60n,
        amountIn: amount,
        amountOutMinimum: 0n,
        sqrtPriceLimitX96: 0n,
      },
    ],
  });
  return pub.waitForTransactionReceipt({ hash });
}
