import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { readManifest, writeManifest, type DevnetManifest } from '../../src/devnet/manifest.ts';
import { startRpcRelay } from './rpc-relay.ts';
import { tempDir } from './temp-dir.ts';

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
  const relay = await startRpcRelay((path) => targets[Number(path.split('/')[1])], {
    beforeForward(calls) {
      if (calls === undefined) count('(unparsable)');
      else for (const call of calls) count(call.method);
    },
  });
  for (const entry of Object.values(manifest.networks)) {
    targets.push(entry.rpcUrl);
    entry.rpcUrl = `${relay.origin}/${targets.length - 1}`;
  }
  const dir = tempDir('rpc-counter');
  const path = join(dir, 'manifest.json');
  writeManifest(path, manifest);
  return {
    manifestPath: path,
    calls: () => new Map(counts),
    total: () => [...counts.values()].reduce((a, b) => a + b, 0),
    async close() {
      await relay.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
