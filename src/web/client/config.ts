/** What the gateway tells its pages (see `src/web/pages.ts`): the networks it settles on and the stock chain. */
export interface WebPageConfig {
  networks: Array<{ caip2: string; chainId: number; name: string; stablecoin: { symbol: string; address: `0x${string}` } }>;
  stockChain?: { caip2: string; chainId: number; name: string; permit2: `0x${string}`; rpcUrl?: string };
}
