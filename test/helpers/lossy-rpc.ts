import { startRpcRelay } from './rpc-relay.ts';

/**
 * A JSON-RPC proxy in front of a node that loses answers: every `eth_sendRawTransaction` is forwarded, and the
 * node takes it, but the first answer for each raw transaction is replaced with an HTTP 503 (a load balancer timing
 * out after the node accepted). Later sends of the same bytes, and every other call, pass through as the node
 * answered. `sends` counts what was forwarded, `lost` the answers swallowed.
 */
export interface LossyRpc {
  url: string;
  sends: number;
  lost: number;
  close(): Promise<void>;
}

export async function startLossyRpc(target: string): Promise<LossyRpc> {
  const answered = new Set<string>();
  const state = { sends: 0, lost: 0 };
  const relay = await startRpcRelay(() => target, {
    answer(calls) {
      const raws = (calls ?? []).flatMap((c) => (c && typeof c === 'object' && c.method === 'eth_sendRawTransaction' ? [String(c.params?.[0])] : []));
      state.sends += raws.length;
      const fresh = raws.filter((r) => !answered.has(r));
      for (const r of raws) answered.add(r);
      if (fresh.length === 0) return undefined;
      state.lost += 1;
      return { status: 503, body: 'upstream timed out' };
    },
  });
  return {
    url: relay.origin,
    get sends() {
      return state.sends;
    },
    get lost() {
      return state.lost;
    },
    close: () => relay.close(),
  };
}
