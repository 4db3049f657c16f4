/**
 * What the stock page reads of the buyer's wallet: whether it is on the stock chain, its stablecoin balance, its
 * Permit2 allowance, its gas, and what the one-time approval would cost.
 */
import { erc20, uint } from './chain-calls.ts';
import type { WebPageConfig } from './config.ts';
import type { Wallet } from './wallet.ts';

type Hex = `0x${string}`;
type StockChain = NonNullable<WebPageConfig['stockChain']>;

export interface WalletState {
  chainOk: boolean;
  stable: bigint;
  allowance: bigint;
  gas: bigint;
  /** Wei the approval would cost, when the wallet could estimate it. */
  approvalCost?: bigint;
}

/**
 * The state of `address` on the stock chain; undefined on the chain until the stablecoin's address is known (read
 * again once the stock list is in).
 */
export async function readWalletState(wallet: Wallet, chain: StockChain, address: Hex, stablecoin: () => Hex | undefined): Promise<WalletState | undefined> {
  const chainOk = (await wallet.chainId()) === chain.chainId;
  if (!chainOk) return { chainOk, stable: 0n, allowance: 0n, gas: 0n };
  const token = stablecoin();
  if (token === undefined) return undefined; // read again once the stock list (and so the stablecoin's address) is in
  const [stable, allowance, gas] = await Promise.all([
    wallet.call(token, erc20.balanceOf(address)).then(uint),
    wallet.call(token, erc20.allowance(address, chain.permit2)).then(uint),
    wallet.balance(address),
  ]);
  const next: WalletState = { chainOk, stable, allowance, gas };
  if (allowance === 0n) next.approvalCost = await approvalCost(wallet, chain, address, token).catch(() => undefined);
  return next;
}

async function approvalCost(wallet: Wallet, chain: StockChain, address: Hex, token: Hex): Promise<bigint> {
  const [gas, price] = await Promise.all([
    wallet.request<Hex>('eth_estimateGas', [{ from: address, to: token, data: erc20.approveMax(chain.permit2) }], 'estimating the approval'),
    wallet.request<Hex>('eth_gasPrice', [], 'reading the gas price'),
  ]);
  return BigInt(gas) * BigInt(price);
}
