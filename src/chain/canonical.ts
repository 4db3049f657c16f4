import type { Address, Hex } from 'viem';

/**
 * Addresses and hashes fixed by the public protocols. Each stands here once; everything else reads it from here
 * (or from the network registry, which is filled from these on the devnet).
 */

/** Uniswap's Permit2, the same address on every chain. Official x402 clients hard-code it. */
export const PERMIT2_ADDRESS: Address = '0x000000000022D473030F116dDEE9F6B43aC78BA3';

/** The x402 exact-permit proxy (the Permit2 `spender` of x402's `exact` scheme). */
export const EXACT_PERMIT2_PROXY_ADDRESS: Address = '0x402085c248EeA27D92E8b30b2C58ed07f9E20001';

/**
 * The x402 `batch-settlement` contracts, at the same address on every chain. The settlement contract is the EIP-712
 * verifying contract of channel ids, vouchers, claim batches and refunds; the collectors pull channel deposits, by
 * EIP-3009 `receiveWithAuthorization` or by a Permit2 witness transfer. Official x402 clients hard-code all three.
 */
export const BATCH_SETTLEMENT_ADDRESS: Address = '0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003';
export const ERC3009_DEPOSIT_COLLECTOR_ADDRESS: Address = '0x4020806089470a89826cB9fB1f4059150b550004';
export const PERMIT2_DEPOSIT_COLLECTOR_ADDRESS: Address = '0x4020425FAf3B746C082C2f942b4E5159887B0005';

/**
 * Multicall3, at the same address on nearly every EVM chain (Base and Base Sepolia included). The settlement engine
 * batches payments through its `aggregate3`; the devnet places gate402's own compatible contract here.
 */
export const MULTICALL3_ADDRESS: Address = '0xcA11bde05977b3631167028862bE2a173976CA11';

/** Init-code hash of the Uniswap V3 pool, which the periphery's PoolAddress library assumes. */
export const UNISWAP_V3_POOL_INIT_CODE_HASH: Hex = '0xe34f199b19b2b4f47f68442619d555527d244f78a3297ea89325f843f87b8b54';

/** The three settlement networks the service speaks, by CAIP-2 id. */
export const CAIP2 = {
  base: 'eip155:8453',
  baseSepolia: 'eip155:84532',
  stockChain: 'eip155:4663',
} as const;
export type Caip2 = (typeof CAIP2)[keyof typeof CAIP2];
export const SUPPORTED_NETWORKS: readonly Caip2[] = [CAIP2.base, CAIP2.baseSepolia, CAIP2.stockChain];

export function chainIdOf(caip2: string): number {
  const m = /^eip155:(\d{1,12})$/.exec(caip2);
  if (!m) throw new Error(`not an eip155 CAIP-2 id: ${caip2}`);
  return Number(m[1]);
}

/** Circle's USDC, at its published addresses: the production stablecoin A of Base and Base Sepolia. */
export const USDC_BASE_ADDRESS: Address = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
export const USDC_BASE_SEPOLIA_ADDRESS: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
