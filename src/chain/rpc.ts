/**
 * One raw JSON-RPC call with a hard timeout, for probes and anvil's own methods (anvil_setCode, evm_mine, ...).
 * Ordinary chain reads and writes go through viem clients built by `clients.ts`.
 */
export async function rpcCall<T>(rpcUrl: string, method: string, params: unknown[], timeoutMs = 10_000): Promise<T> {
  const res = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}
