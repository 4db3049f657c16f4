/**
 * A devnet's chains as they stand, saved once and started again as often as wanted: a test run deploys its devnet
 * once, and every test file that needs chains of its own starts them from the saved state (anvil's `--load-state`)
 * instead of deploying and funding everything again (about 4 CPU s a devnet, against 0.3 for three loaded anvils).
 * Each start is three new anvil processes on ports of their own, holding the same contracts at the same addresses,
 * the same accounts, balances, nonces and blocks as the chains saved; what one does never reaches another.
 */
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { chainIdOf } from '../chain/canonical.ts';
import { rpcCall } from '../chain/rpc.ts';
import { readManifest, writeManifest, type DevnetManifest } from './manifest.ts';
import { startChains, type Devnet } from './run.ts';

const MANIFEST_FILE = 'manifest.json';
const stateFile = (dir: string, caip2: string): string => join(dir, `chain-${chainIdOf(caip2)}.json`);

/** anvil_dumpState's answer: the state as JSON, gzipped, in hex. */
function stateJson(dumped: string): Buffer {
  const bytes = Buffer.from(dumped.replace(/^0x/, ''), 'hex');
  return bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes) : bytes;
}

/**
 * Saves the state of every chain of `manifest` in `dir` (replacing what was there), with the manifest, so that
 * {@link startDevnetFromSnapshot} can start the same chains again. The chains must be idle while this runs.
 */
export async function saveDevnetSnapshot(manifest: DevnetManifest, dir: string): Promise<void> {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  await Promise.all(
    Object.entries(manifest.networks).map(async ([caip2, n]) => {
      writeFileSync(stateFile(dir, caip2), stateJson(await rpcCall<string>(n.rpcUrl, 'anvil_dumpState', [], 30_000)));
    }),
  );
  // Last: its presence says the snapshot is whole.
  writeManifest(join(dir, MANIFEST_FILE), manifest);
}

export function hasDevnetSnapshot(dir: string): boolean {
  return existsSync(join(dir, MANIFEST_FILE));
}

/**
 * New chains from the snapshot in `dir`, on ports the kernel gives, owned by this process; their manifest (the saved
 * one with the new RPC URLs and this process as owner) is written to `manifestPath`.
 */
export async function startDevnetFromSnapshot(dir: string, manifestPath: string, host = '127.0.0.1'): Promise<Devnet> {
  const saved = readManifest(join(dir, MANIFEST_FILE));
  const ports = Object.fromEntries(Object.keys(saved.networks).map((caip2) => [caip2, 0]));
  const chains = await startChains({ host, ports, loadState: (caip2) => stateFile(dir, caip2) });
  try {
    const networks = Object.fromEntries(
      Object.entries(saved.networks).map(([caip2, n]) => {
        const endpoint = chains.endpoints[caip2];
        if (!endpoint) throw new Error(`no chain started for ${caip2}`);
        return [caip2, { ...n, rpcUrl: endpoint.rpcUrl }];
      }),
    );
    const manifest: DevnetManifest = { ...saved, createdAt: new Date().toISOString(), pid: process.pid, networks };
    writeManifest(manifestPath, manifest);
    return { manifest, owned: true, stop: chains.stop };
  } catch (err) {
    await chains.stop();
    throw err;
  }
}
