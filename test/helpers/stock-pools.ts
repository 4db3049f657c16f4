import type { NetworkEntry, StockInfo } from '../../src/chain/network-types.ts';

/**
 * Which test file may trade on which of the devnet's 14 stock pools. Files run side by side on one devnet: a file
 * that expects a pool at its seed price, or that quotes and then swaps expecting the same figure, must not share
 * that pool with a file that moves it. Every pool is named once.
 */
export const STOCK_POOLS = {
  /** test/devnet-swaps.test.ts alone: it reads them at their seed prices. */
  seedPrice: ['PLTR', 'COIN', 'HOOD', 'SPY', 'QQQ'],
  /** test/stock-buy.test.ts (it moves TSLA in size). */
  stockBuy: ['TSLA', 'AAPL', 'MSFT', 'AMZN', 'GOOGL'],
  /** test/browser/web.test.ts. */
  web: ['NVDA', 'AMD'],
  /** test/adversarial/stock-terms.test.ts (it moves META and NFLX in size). */
  attackStock: ['META', 'NFLX'],
} as const satisfies Record<string, readonly string[]>;

/** The listed stocks of `n` in one file's share of the pools. */
export function poolsOf(n: NetworkEntry, share: keyof typeof STOCK_POOLS): StockInfo[] {
  const symbols: readonly string[] = STOCK_POOLS[share];
  const found = (n.stocks ?? []).filter((s) => symbols.includes(s.symbol));
  if (found.length !== symbols.length) throw new Error(`the devnet does not list all of ${symbols.join(', ')}`);
  return found;
}
