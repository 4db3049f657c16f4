import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One request the upstream received, as it came on the wire. */
export interface SeenRequest {
  method: string;
  /** The raw request target, path and query, exactly as sent. */
  url: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/** How the upstream answers a request: with the node response, or by writing raw bytes to the socket. */
export type Behaviour = (req: SeenRequest, res: ServerResponse, socket: Socket) => void | Promise<void>;

export interface HostileUpstream {
  origin: string;
  readonly seen: SeenRequest[];
  /** Calls per raw path (without the query). */
  callsTo(path: string): number;
  /** Calls whose path does not start with `prefix`. */
  callsOutside(prefix: string): SeenRequest[];
  /** Sets how requests to paths starting with `prefix` are answered (the longest prefix wins); `undefined` resets. */
  behave(prefix: string, b: Behaviour | undefined): void;
  close(): Promise<void>;
}

/** The default answer: 200 JSON naming the request, with a cache header that a paid answer must not pass on. */
export const echoJson: Behaviour = (req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=3600', server: 'hostile-upstream' });
  res.end(JSON.stringify({ ok: true, url: req.url }));
};

/**
 * An upstream under the test's control, standing in for every merchant of the built-in catalog (the gateway's
 * `GATE402_CATALOG_UPSTREAM_BASE`): it counts calls per path and records what each request carried, and answers as
 * told per path prefix (held open, redirects, raw bytes, endless bodies...).
 */
export async function startHostileUpstream(): Promise<HostileUpstream> {
  const seen: SeenRequest[] = [];
  const behaviours = new Map<string, Behaviour>();
  const sockets = new Set<Socket>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '';
      const q = url.indexOf('?');
      const request: SeenRequest = { method: req.method ?? '', url, path: q < 0 ? url : url.slice(0, q), headers: { ...req.headers }, body: Buffer.concat(chunks) };
      seen.push(request);
      let best: Behaviour = echoJson;
      let bestLength = -1;
      for (const [prefix, b] of behaviours) {
        if (request.path.startsWith(prefix) && prefix.length > bestLength) {
          best = b;
          bestLength = prefix.length;
        }
      }
      void Promise.resolve(best(request, res, req.socket)).catch(() => req.socket.destroy());
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    seen,
    callsTo: (path) => seen.filter((r) => r.path === path).length,
    callsOutside: (prefix) => seen.filter((r) => !r.path.startsWith(prefix)),
    behave(prefix, b) {
      if (b === undefined) behaviours.delete(prefix);
      else behaviours.set(prefix, b);
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
