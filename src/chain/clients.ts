import { createPublicClient, createWalletClient, defineChain, http, type Account, type Chain, type PublicClient, type Transport, type WalletClient } from 'viem';

export interface ClientOptions {
  /** Per-request timeout for every RPC call. */
  timeoutMs?: number;
  /** How often receipts and blocks are polled. Short on a local chain, longer on a public one. */
  pollingIntervalMs?: number;
}

export function chainFor(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: `eip155:${chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

export function publicClientFor(chainId: number, rpcUrl: string, opts: ClientOptions = {}): PublicClient<Transport, Chain> {
  return createPublicClient({
    chain: chainFor(chainId, rpcUrl),
    transport: http(rpcUrl, { timeout: opts.timeoutMs ?? 10_000, retryCount: 2 }),
    pollingInterval: opts.pollingIntervalMs ?? 100,
  });
}

export function walletClientFor(chainId: number, rpcUrl: string, account: Account, opts: ClientOptions = {}): WalletClient<Transport, Chain, Account> {
  return createWalletClient({
    account,
    chain: chainFor(chainId, rpcUrl),
    transport: http(rpcUrl, { timeout: opts.timeoutMs ?? 10_000, retryCount: 0 }),
    pollingInterval: opts.pollingIntervalMs ?? 100,
  });
}
