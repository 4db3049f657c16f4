import { EXACT_PERMIT2_PROXY_ADDRESS, MULTICALL3_ADDRESS, PERMIT2_ADDRESS } from './canonical.ts';
import type { NetworkRegistry } from './networks.ts';

/**
 * Every contract the configured networks name (stablecoins, Permit2, the exact-permit proxy, multicall, Uniswap,
 * stock tokens and their pools) and the canonical ones, lower-case: addresses a payment is never meant for.
 */
export function knownContracts(networks: NetworkRegistry): Set<string> {
  const out = new Set<string>([PERMIT2_ADDRESS, EXACT_PERMIT2_PROXY_ADDRESS, MULTICALL3_ADDRESS].map((a) => a.toLowerCase()));
  for (const n of networks.all()) {
    const u = n.uniswap;
    const addresses = [
      n.stablecoin.address,
      n.permit2,
      n.exactPermit2Proxy,
      n.multicall,
      ...(u ? [u.factory, u.router, u.quoter, u.weth] : []),
      ...(n.stocks ?? []).flatMap((s) => [s.address, s.pool]),
    ];
    for (const a of addresses) if (a) out.add(a.toLowerCase());
  }
  return out;
}
