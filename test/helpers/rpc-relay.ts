import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One JSON-RPC call of a request (a batch has several). */
export type RpcCall = { method?: string; params?: unknown[] };

export interface RpcRelayHooks {
  /** Told of each request's calls (`undefined` when its body is not JSON) before it is forwarded; may hold it. */
  beforeForward?(calls: RpcCall[] | undefined): Promise<void> | void;
  /** May replace the node's answer once the node has taken the request (an answer lost on its way back, say). */
  answer?(calls: RpcCall[] | undefined): { status: number; body: string } | undefined;
  /** Told of the node's answer before it goes back to the service; may hold it (a receipt kept on its way back, say). */
  afterForward?(calls: RpcCall[] | undefined, answer: Buffer): Promise<void> | void;
}

export interface RpcRelay {
  /** The relay's origin, `http://127.0.0.1:<port>`. */
  origin: string;
  close(): Promise<void>;
}

/**
 * A JSON-RPC relay between a service under test and its chains, on loopback: each request goes to the node
 * `targetFor` names for its path (404 when none), and `hooks` see, hold or rewrite what passes. The one way the tests
 * put a misbehaving or observed node in front of a service.
 */
export async function startRpcRelay(targetFor: (path: string) => string | undefined, hooks: RpcRelayHooks = {}): Promise<RpcRelay> {
  async function relay(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    let calls: RpcCall[] | undefined;
    try {
      const parsed = JSON.parse(body.toString('utf8')) as RpcCall | RpcCall[];
      calls = Array.isArray(parsed) ? parsed : [parsed];
    } catch {
      calls = undefined; // passed on as it is
    }
    await hooks.beforeForward?.(calls);
    const target = targetFor(req.url ?? '/');
    if (target === undefined) {
      res.writeHead(404).end();
      return;
    }
    const node = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const bytes = Buffer.from(await node.arrayBuffer());
    await hooks.afterForward?.(calls, bytes);
    const replaced = hooks.answer?.(calls);
    if (res.destroyed) return;
    if (replaced) res.writeHead(replaced.status, { 'content-type': 'text/plain' }).end(replaced.body);
    else res.writeHead(node.status, { 'content-type': node.headers.get('content-type') ?? 'application/json' }).end(bytes);
  }
  const server = createServer((req, res) => {
    relay(req, res).catch(() => {
      if (!res.destroyed && !res.headersSent) res.writeHead(502).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
