import { createServer, type Server } from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readManifest, writeManifest, type DevnetManifest } from '../../src/chain/manifest.ts';

export interface CountingRpc {
  /** A manifest like the original, every network's `rpcUrl` pointing through the proxy. */
  manifestPath: string;
  /** JSON-RPC calls forwarded so far (each member of a batch counts), by method. */
  calls(): Map<string, number>;
  total(): number;
  close(): Promise<void>;
}

/**
 * A JSON-RPC proxy in front of each network of a devnet manifest that counts every call it forwards: what a service
 * pointed at it asks of the chains is seen from outside the service. `edit` may change the copy first.
 */
export async function countingRpcProxy(manifestPath: string, edit: (manifest: DevnetManifest) => void = () => {}): Promise<CountingRpc> {
  const manifest = readManifest(manifestPath);
  edit(manifest);
  const targets: string[] = [];
  const counts = new Map<string, number>();
  const count = (method: unknown) => counts.set(String(method), (counts.get(String(method)) ?? 0) + 1);
  const server: Server = createServer((req, res) => {
    const target = targets[Number((req.url ?? '').split('/')[1])];
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      try {
        const parsed = JSON.parse(body.toString('utf8')) as { method?: unknown } | Array<{ method?: unknown }>;
        for (const call of Array.isArray(parsed) ? parsed : [parsed]) count(call.method);
      } catch {
        count('(unparsable)');
      }
      if (!target) {
        res.writeHead(404).end();
        return;
      }
      fetch(target, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(
        async (r) => {
          res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' });
          res.end(Buffer.from(await r.arrayBuffer()));
        },
        () => res.writeHead(502).end(),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  for (const entry of Object.values(manifest.networks)) {
    targets.push(entry.rpcUrl);
    entry.rpcUrl = `http://127.0.0.1:${port}/${targets.length - 1}`;
  }
  const dir = mkdtempSync(join(tmpdir(), 'gate402-rpc-counter-'));
  const path = join(dir, 'manifest.json');
  writeManifest(path, manifest);
  return {
    manifestPath: path,
    calls: () => new Map(counts),
    total: () => [...counts.values()].reduce((a, b) => a + b, 0),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
