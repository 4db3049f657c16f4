/** Uniswap V3 price arithmetic in exact integers. Pure functions, shared by the devnet seeder and the stock API. */
import { encodeAbiParameters, getContractAddress, keccak256, type Address, type Hex } from 'viem';

const Q96 = 1n << 96n;
const Q192 = 1n << 192n;

/** Tick spacing per fee tier (hundredths of a bip), as the factory enables them. */
export const TICK_SPACING: Readonly<Record<number, number>> = { 100: 1, 500: 10, 3000: 60, 10000: 200 };
const MAX_TICK = 887272;

export function fullRangeTicks(fee: number): { tickLower: number; tickUpper: number } {
  const spacing = TICK_SPACING[fee];
  if (!spacing) throw new Error(`no tick spacing for fee ${fee}`);
  const upper = Math.floor(MAX_TICK / spacing) * spacing;
  return { tickLower: -upper, tickUpper: upper };
}

export function isqrt(n: bigint): bigint {
  if (n < 0n) throw new Error('square root of a negative number');
  if (n < 2n) return n;
  // One Newton step from any positive guess lands at or above the root (AM-GM); from there it descends to it.
  let x = BigInt(Math.ceil(Math.sqrt(Number(n)))) || 1n;
  x = (x + n / x) >> 1n;
  for (;;) {
    const y = (x + n / x) >> 1n;
    if (y >= x) return x;
    x = y;
  }
}

/**
 * sqrtPriceX96 for a pool of `stable` (6 decimals) and `stock` (18 decimals) at `priceMicroUsd` atomic stable
 * units per whole share. Uniswap prices token1 in token0, so the pool's token order decides the ratio.
 */
export function sqrtPriceX96ForStockPrice(priceMicroUsd: bigint, stockDecimals: number, stableIsToken0: boolean): bigint {
  const shareUnit = 10n ** BigInt(stockDecimals);
  // raw price = token1 per token0
  const [num, den] = stableIsToken0 ? [shareUnit, priceMicroUsd] : [priceMicroUsd, shareUnit];
  return isqrt((num * Q192) / den);
}

/** Atomic stable units per whole share at a pool's current sqrtPriceX96 (rounded down). */
export function stockPriceFromSqrtPriceX96(sqrtPriceX96: bigint, stockDecimals: number, stableIsToken0: boolean): bigint {
  const shareUnit = 10n ** BigInt(stockDecimals);
  const sq = sqrtPriceX96 * sqrtPriceX96;
  return stableIsToken0 ? (shareUnit * Q192) / sq : (sq * shareUnit) / Q192;
}

/** Liquidity that puts about `stableAmount` atomic stable units into a full-range position at `sqrtPriceX96`. */
export function fullRangeLiquidityForStable(stableAmount: bigint, sqrtPriceX96: bigint, stableIsToken0: boolean): bigint {
  // amount1 ~= L * sqrtP / Q96 ; amount0 ~= L * Q96 / sqrtP (the far bound's term is negligible at full range)
  return stableIsToken0 ? (stableAmount * sqrtPriceX96) / Q96 : (stableAmount * Q96) / sqrtPriceX96;
}

/** Tokens in the pool's order: the lower address is token0. */
export function sortTokens(a: Address, b: Address): [Address, Address] {
  return a.toLowerCase() < b.toLowerCase() ? [a, b] : [b, a];
}

/** Where the factory's CREATE2 puts the pool of `a`/`b` at `fee`: the only pool address a swap may trust. */
export function uniswapPoolAddress(factory: Address, a: Address, b: Address, fee: number, initCodeHash: Hex): Address {
  const [token0, token1] = sortTokens(a, b);
  const salt = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'address' }, { type: 'uint24' }], [token0, token1, fee]));
  return getContractAddress({ opcode: 'CREATE2', from: factory, salt, bytecodeHash: initCodeHash });
}
