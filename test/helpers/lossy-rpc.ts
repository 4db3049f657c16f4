import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

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
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      void (async () => {
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
        if (fresh.length) {
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
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
