import type { Address } from 'viem';

const TWO_192 = 2n ** 192n;

/**
 * Stablecoin atomic units per whole share at a Uniswap V3 pool's slot0, worked out here from the chain's raw
 * figures and not by src/chain/uniswap-math.ts (the code under test). slot0's sqrtPriceX96 squared over 2^192 is
 * the price of token0 in token1, in atomic units; the token with the lower address is token0. Rounded down.
 */
export function sharePriceFromSlot0(sqrtPriceX96: bigint, stable: Address, stock: Address, stockDecimals: number): bigint {
  const wholeShare = 10n ** BigInt(stockDecimals);
  const stableIsToken0 = BigInt(stable) < BigInt(stock);
  const squared = sqrtPriceX96 * sqrtPriceX96;
  // token0 = stable: squared / 2^192 shares (atomic) per stable unit, so a whole share costs wholeShare * 2^192 / squared.
  // token0 = stock: squared / 2^192 stable units per atomic share, so a whole share costs squared * wholeShare / 2^192.
  return stableIsToken0 ? (wholeShare * TWO_192) / squared : (squared * wholeShare) / TWO_192;
}

/** The same price from slot0's tick instead (1.0001^tick is token0's price in token1), as a float: a second opinion. */
export function sharePriceFromTick(tick: number, stable: Address, stock: Address, stockDecimals: number): number {
  const token0InToken1 = 1.0001 ** tick;
  const stableIsToken0 = BigInt(stable) < BigInt(stock);
  return stableIsToken0 ? 10 ** stockDecimals / token0InToken1 : token0InToken1 * 10 ** stockDecimals;
}
