import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A JSON-RPC proxy in front of a node, in one of two faults:
 * - `lost-send-answers`: every `eth_sendRawTransaction` is forwarded, and the node takes it, but the first answer
 *   for each raw transaction is replaced with an HTTP 503 (a load balancer timing out after the node accepted).
 *   Later sends of the same bytes pass through as the node answered.
 * - `pruned-state`: a node keeping no state but the head's: an `eth_call` at a block number below the head is
 *   refused (as a pruned full node refuses: "missing trie node").
 * Everything else passes through. `sends` counts the sends forwarded, `lost` the answers swallowed, `refused` the
 * calls refused.
 */
export interface LossyRpc {
  url: string;
  sends: number;
  lost: number;
  refused: number;
  close(): Promise<void>;
}

export type RpcFault = 'lost-send-answers' | 'pruned-state';

/** A single JSON-RPC call's `block` parameter below the head (read from the node first). */
async function belowHead(target: string, call: { method?: string; params?: unknown[] }): Promise<boolean> {
  if (call.method !== 'eth_call') return false;
  const block = call.params?.[1];
  if (typeof block !== 'string' || !/^0x[0-9a-f]+$/i.test(block)) return false;
  const res = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }) });
  const head = BigInt(((await res.json()) as { result: string }).result);
  return BigInt(block) < head;
}

export async function startLossyRpc(target: string, fault: RpcFault = 'lost-send-answers'): Promise<LossyRpc> {
  const answered = new Set<string>();
  const state = { sends: 0, lost: 0, refused: 0 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      void (async () => {
        if (fault === 'pruned-state') {
          const call = JSON.parse(body) as { id?: unknown; method?: string; params?: unknown[] };
          if (!Array.isArray(call) && (await belowHead(target, call))) {
            state.refused += 1;
            res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: call.id, error: { code: -32000, message: 'missing trie node' } }));
            return;
          }
        }
        const upstream = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        const text = await upstream.text();
        let parsed: unknown;
        try {
          parsed = JSON.parse(body);
        } catch {
          parsed = undefined;
        }
        const calls = Array.isArray(parsed) ? parsed : [parsed];
        const raws = calls.flatMap((c) => (c && typeof c === 'object' && (c as { method?: string }).method === 'eth_sendRawTransaction' ? [String((c as { params?: unknown[] }).params?.[0])] : []));
        state.sends += raws.length;
        const fresh = raws.filter((r) => !answered.has(r));
        for (const r of raws) answered.add(r);
        if (fault === 'lost-send-answers' && fresh.length) {
          state.lost += 1;
          res.writeHead(503, { 'content-type': 'text/plain' }).end('upstream timed out');
          return;
        }
        res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(text);
      })().catch((err: unknown) => res.writeHead(502).end(String(err)));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    get sends() {
      return state.sends;
    },
    get lost() {
      return state.lost;
    },
    get refused() {
      return state.refused;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
