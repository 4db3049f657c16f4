import { createPublicClient, createWalletClient, defineChain, http, type Account, type EIP1193RequestFn, type Chain, type PublicClient, type Transport, type WalletClient } from 'viem';

export interface ClientOptions {
  /** Per-request timeout for every RPC call. */
  timeoutMs?: number;
  /** How often receipts and blocks are polled. Short on a local chain, longer on a public one. */
  pollingIntervalMs?: number;
  /** Told of every JSON-RPC call: its method, its duration (retries included) and whether it failed. */
  observe?: RpcObserver;
}

/** Told of every JSON-RPC call a client makes (for metrics). */
export type RpcObserver = (method: string, seconds: number, failed: boolean) => void;

/** `transport`, with every request reported to `observe`. */
function observed(transport: Transport, observe: RpcObserver): Transport {
  return (config) => {
    const inner = transport(config);
    const request: EIP1193RequestFn = async (args, options) => {
      const started = performance.now();
      try {
        // The result type is the caller's generic parameter; a pass-through returns exactly what the inner request gave.
        const result = (await inner.request(args, options)) as never;
        observe(args.method, (performance.now() - started) / 1000, false);
        return result;
      } catch (err) {
        observe(args.method, (performance.now() - started) / 1000, true);
        throw err;
      }
    };
    return { ...inner, request };
  };
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
  const transport = http(rpcUrl, { timeout: opts.timeoutMs ?? 10_000, retryCount: 2 });
  return createPublicClient({
    chain: chainFor(chainId, rpcUrl),
    transport: opts.observe ? observed(transport, opts.observe) : transport,
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
