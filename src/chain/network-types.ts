import type { Address, Hex } from 'viem';

/** The settlement stablecoin of a network, as its contract signs EIP-712 payments. */
export interface StablecoinInfo {
  address: Address;
  /** EIP-712 domain name, exactly as the token signs. */
  name: string;
  /** EIP-712 domain version. */
  version: string;
  decimals: number;
  symbol: string;
}

/** One tokenized stock the stock desk sells, with the Uniswap V3 pool it is bought through. */
export interface StockInfo {
  symbol: string;
  name: string;
  address: Address;
  decimals: number;
  /** The stablecoin pool of this stock, derived from the factory (CREATE2), pinned here. */
  pool: Address;
  fee: number;
  /** The price the pool was seeded at, USD per share, 6 fraction digits. */
  seedPriceUsd: string;
}

/** The Uniswap V3 deployment the stock desk quotes and swaps through. */
export interface UniswapInfo {
  factory: Address;
  router: Address;
  quoter: Address;
  weth: Address;
  poolInitCodeHash: Hex;
}

/** One settlement network as configured: in a networks file (`GATE402_NETWORKS_FILE`) or a devnet manifest. */
export interface NetworkEntry {
  chainId: number;
  rpcUrl: string;
  stablecoin: StablecoinInfo;
  permit2?: Address;
  exactPermit2Proxy?: Address;
  /** A Multicall3-compatible `aggregate3` contract: where there is one, settlements may be batched through it. */
  multicall?: Address;
  uniswap?: UniswapInfo;
  stocks?: StockInfo[];
}
