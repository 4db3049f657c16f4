import { erc20Abi, type Address, type PublicClient } from 'viem';

/** The most `balanceOf` calls in one `aggregate3`. */
const MAX_CALLS = 256;

interface Waiting {
  token: Address;
  owner: Address;
  resolve(value: bigint): void;
  reject(error: unknown): void;
}

/**
 * ERC-20 balances read together: the reads asked for one block in the same turn of the event loop go to the chain as
 * one `aggregate3` call through `multicall` (a read that fails fails alone), instead of an `eth_call` each. A node
 * answers calls about one at a time, so a storm of new payers' first payments would otherwise wait behind a hundred
 * calls; without a multicall contract every read is its own call.
 */
export function batchedBalanceOf(client: Pick<PublicClient, 'multicall' | 'readContract'>, multicall: Address | undefined): (token: Address, owner: Address, block: bigint) => Promise<bigint> {
  if (multicall === undefined) return (token, owner, block) => client.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [owner], blockNumber: block });
  const pending = new Map<bigint, Waiting[]>();
  const flush = (block: bigint) => {
    const waiting = pending.get(block) ?? [];
    pending.delete(block);
    for (let i = 0; i < waiting.length; i += MAX_CALLS) {
      const part = waiting.slice(i, i + MAX_CALLS);
      client
        .multicall({
          contracts: part.map((w) => ({ address: w.token, abi: erc20Abi, functionName: 'balanceOf' as const, args: [w.owner] as const })),
          blockNumber: block,
          multicallAddress: multicall,
          allowFailure: true,
        })
        .then(
          (results) =>
            results.forEach((r, j) => {
              const w = part[j] as Waiting;
              if (r.status === 'success') w.resolve(r.result as bigint);
              else w.reject(r.error);
            }),
          (error: unknown) => {
            for (const w of part) w.reject(error);
          },
        );
    }
  };
  return (token, owner, block) =>
    new Promise<bigint>((resolve, reject) => {
      let waiting = pending.get(block);
      if (waiting === undefined) {
        waiting = [];
        pending.set(block, waiting);
        setImmediate(() => flush(block));
      }
      waiting.push({ token, owner, resolve, reject });
    });
}
