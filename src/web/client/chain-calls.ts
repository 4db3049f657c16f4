/**
 * The few contract calls the pages make through the wallet, encoded by hand (one selector and 32-byte words each):
 * ERC-20 `balanceOf`, `allowance` and the one `approve` of Permit2.
 */
type Hex = `0x${string}`;

const word = (address: string) => address.replace(/^0x/, '').toLowerCase().padStart(64, '0');

export const erc20 = {
  balanceOf: (owner: string): Hex => `0x70a08231${word(owner)}`,
  allowance: (owner: string, spender: string): Hex => `0xdd62ed3e${word(owner)}${word(spender)}`,
  /** `approve(spender, 2**256 - 1)`: once, so that every later payment is a signature. */
  approveMax: (spender: string): Hex => `0x095ea7b3${word(spender)}${'f'.repeat(64)}`,
};

/** A `uint256` return value (`0x` alone, from an address without code, reads as 0). */
export function uint(result: Hex): bigint {
  return result === '0x' ? 0n : BigInt(result);
}
