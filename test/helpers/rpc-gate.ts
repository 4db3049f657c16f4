import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

type RpcCall = { method?: string; params?: unknown[] };

/**
 * A JSON-RPC relay between a service under test and a chain, that can hold the calls a predicate picks until it is
 * told to let them through: a slow or stalled node, made on purpose, to stop a service at a chosen step. Everything
 * else passes straight through.
 */
export interface RpcGate {
  url: string;
  /** Calls matching `pick` wait from now on, until `release`; `held` counts those waiting. */
  hold(pick: (call: RpcCall) => boolean): void;
  release(): void;
  readonly held: number;
  close(): Promise<void>;
}

export async function startRpcGate(upstream: string): Promise<RpcGate> {
  let pick: ((call: RpcCall) => boolean) | undefined;
  let waiting: Array<() => void> = [];

  async function relay(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    let calls: RpcCall[] = [];
    try {
      const parsed = JSON.parse(body.toString('utf8')) as RpcCall | RpcCall[];
      calls = Array.isArray(parsed) ? parsed : [parsed];
    } catch {
      // not JSON: passed on as it is
    }
    if (pick && calls.some((c) => pick!(c))) await new Promise<void>((resolve) => waiting.push(resolve));
    const answer = await fetch(upstream, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const bytes = Buffer.from(await answer.arrayBuffer());
    if (!res.destroyed) res.writeHead(answer.status, { 'content-type': 'application/json' }).end(bytes);
  }

  const server = createServer((req, res) => {
    relay(req, res).catch(() => {
      if (!res.destroyed && !res.headersSent) res.writeHead(502).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const release = () => {
    pick = undefined;
    const go = waiting;
    waiting = [];
    for (const resolve of go) resolve();
  };
  return {
    url: `http://127.0.0.1:${port}`,
    hold(p) {
      pick = p;
    },
    release,
    get held() {
      return waiting.length;
    },
    async close() {
      release();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
