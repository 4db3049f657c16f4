import { readFileSync } from 'node:fs';
import { getAddress } from 'viem';
import { CAIP2, EXACT_PERMIT2_PROXY_ADDRESS, MULTICALL3_ADDRESS, PERMIT2_ADDRESS, USDC_BASE_ADDRESS, USDC_BASE_SEPOLIA_ADDRESS } from './canonical.ts';
import type { NetworkEntry, StablecoinInfo } from './network-types.ts';
import { parseNetworksFile } from './networks-file.ts';

/** One settlement network as the service sees it: a manifest entry, named by its CAIP-2 id. */
export interface Network extends NetworkEntry {
  caip2: string;
}

/** The one registry of networks: every address the service uses on a chain is read from here. */
export class NetworkRegistry {
  readonly #byId: Map<string, Network>;

  constructor(networks: Network[]) {
    this.#byId = new Map(networks.map((n) => [n.caip2, n]));
  }

  all(): Network[] {
    return [...this.#byId.values()];
  }

  has(caip2: string): boolean {
    return this.#byId.has(caip2);
  }

  get(caip2: string): Network {
    const n = this.#byId.get(caip2);
    if (!n) throw new Error(`network ${caip2} is not configured`);
    return n;
  }

  find(caip2: string): Network | undefined {
    return this.#byId.get(caip2);
  }

  /** The network whose configured stablecoin is `asset`, or undefined: only configured assets are ever settled. */
  stablecoinOn(caip2: string, asset: string): StablecoinInfo | undefined {
    const n = this.#byId.get(caip2);
    if (!n) return undefined;
    return n.stablecoin.address.toLowerCase() === asset.toLowerCase() ? n.stablecoin : undefined;
  }
}

function fromEntry(caip2: string, e: NetworkEntry): Network {
  return {
    caip2,
    chainId: e.chainId,
    rpcUrl: e.rpcUrl,
    stablecoin: { ...e.stablecoin, address: getAddress(e.stablecoin.address) },
    ...(e.permit2 ? { permit2: getAddress(e.permit2) } : {}),
    ...(e.exactPermit2Proxy ? { exactPermit2Proxy: getAddress(e.exactPermit2Proxy) } : {}),
    ...(e.multicall ? { multicall: getAddress(e.multicall) } : {}),
    ...(e.uniswap ? { uniswap: e.uniswap } : {}),
    ...(e.stocks ? { stocks: e.stocks } : {}),
  };
}

/** A registry of configured entries, keyed by CAIP-2 id (the `networks` of a networks file or a devnet manifest). */
export function networksFromEntries(entries: Record<string, NetworkEntry>): NetworkRegistry {
  return new NetworkRegistry(Object.entries(entries).map(([id, e]) => fromEntry(id, e)));
}

/** True when the environment configures production networks: then no devnet manifest is looked for. */
export function productionNetworksConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.GATE402_NETWORKS_FILE || env.GATE402_RPC_EIP155_8453 || env.GATE402_RPC_EIP155_84532);
}

/**
 * Production networks. Base and Base Sepolia carry Circle's USDC at its published addresses; the RPC URLs come
 * from the environment. The stock chain has no public defaults: it is configured by a networks file
 * (`GATE402_NETWORKS_FILE`, the same shape as the devnet manifest's `networks`), which may also override the rest.
 */
export function productionNetworks(env: NodeJS.ProcessEnv = process.env): NetworkRegistry {
  const defaults: Record<string, NetworkEntry> = {};
  if (env.GATE402_RPC_EIP155_8453) {
    defaults[CAIP2.base] = {
      chainId: 8453,
      rpcUrl: env.GATE402_RPC_EIP155_8453,
      stablecoin: { address: USDC_BASE_ADDRESS, name: 'USD Coin', version: '2', decimals: 6, symbol: 'USDC' },
      multicall: MULTICALL3_ADDRESS,
    };
  }
  if (env.GATE402_RPC_EIP155_84532) {
    defaults[CAIP2.baseSepolia] = {
      chainId: 84532,
      rpcUrl: env.GATE402_RPC_EIP155_84532,
      stablecoin: { address: USDC_BASE_SEPOLIA_ADDRESS, name: 'USDC', version: '2', decimals: 6, symbol: 'USDC' },
      multicall: MULTICALL3_ADDRESS,
    };
  }
  const file = env.GATE402_NETWORKS_FILE;
  const fromFile = file ? parseNetworksFile(readFileSync(file, 'utf8'), file) : {};
  const merged = { ...defaults, ...fromFile };
  const stock = merged[CAIP2.stockChain];
  if (stock) merged[CAIP2.stockChain] = { permit2: PERMIT2_ADDRESS, exactPermit2Proxy: EXACT_PERMIT2_PROXY_ADDRESS, ...stock };
  return new NetworkRegistry(Object.entries(merged).map(([id, e]) => fromEntry(id, e)));
}
