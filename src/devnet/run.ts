import { existsSync } from 'node:fs';
import { CAIP2, chainIdOf } from '../chain/canonical.ts';
import { startAnvil, type RunningAnvil } from './anvil.ts';
import { readManifest, writeManifest, type DevnetManifest } from './manifest.ts';
import { rpcCall } from '../chain/rpc.ts';
import { DEVNET_ROLES, DEVNET_TEST_MNEMONIC } from './accounts.ts';
import { deployDevnet, type ChainEndpoint } from './deploy.ts';

export interface DevnetOptions {
  manifestPath: string;
  host: string;
  /** RPC port per CAIP-2 id. */
  ports: Record<string, number>;
  /** Start new chains even when the manifest's chains are running (stopping the process that owns them). */
  fresh: boolean;
  /** Seconds per block; automine when omitted. */
  blockTime?: number;
  log?: (line: string) => void;
}

export interface Devnet {
  manifest: DevnetManifest;
  /** False when the chains belong to another running process and were reused. */
  owned: boolean;
  stop(): Promise<void>;
}

export const DEFAULT_DEVNET_PORTS: Record<string, number> = { [CAIP2.base]: 8545, [CAIP2.baseSepolia]: 8546, [CAIP2.stockChain]: 8547 };

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** True when every chain of the manifest answers with its chain id and still holds the deployed contracts. */
export async function manifestIsLive(manifest: DevnetManifest): Promise<boolean> {
  const checks = Object.entries(manifest.networks).map(async ([caip2, n]) => {
    const id = await rpcCall<string>(n.rpcUrl, 'eth_chainId', [], 1000);
    if (Number(id) !== chainIdOf(caip2)) return false;
    const code = await rpcCall<string>(n.rpcUrl, 'eth_getCode', [n.stablecoin.address, 'latest'], 1000);
    return code !== '0x';
  });
  try {
    return (await Promise.all(checks)).every(Boolean);
  } catch {
    return false;
  }
}

async function waitUntilDead(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  if (alive(pid)) process.kill(pid, 'SIGKILL');
}

export async function startDevnet(opts: DevnetOptions): Promise<Devnet> {
  const log = opts.log ?? (() => {});
  if (existsSync(opts.manifestPath)) {
    const previous = readManifest(opts.manifestPath);
    const live = await manifestIsLive(previous);
    if (live && !opts.fresh) {
      log(`reusing the running devnet of ${opts.manifestPath} (owned by pid ${previous.pid})`);
      return { manifest: previous, owned: false, stop: async () => {} };
    }
    if (opts.fresh && previous.pid !== process.pid && alive(previous.pid)) {
      log(`--fresh: stopping the devnet owned by pid ${previous.pid}`);
      process.kill(previous.pid, 'SIGTERM');
      await waitUntilDead(previous.pid, 10_000);
    }
  }

  const anvils: RunningAnvil[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(anvils.splice(0).map((a) => a.stop()));
  };
  try {
    const endpoints: Record<string, ChainEndpoint> = {};
    await Promise.all(
      Object.entries(opts.ports).map(async ([caip2, port]) => {
        const anvil = await startAnvil({
          chainId: chainIdOf(caip2),
          port,
          host: opts.host,
          mnemonic: DEVNET_TEST_MNEMONIC,
          fundedAccounts: DEVNET_ROLES.fundedAccounts,
          ...(opts.blockTime !== undefined ? { blockTime: opts.blockTime } : {}),
        });
        anvils.push(anvil);
        endpoints[caip2] = { chainId: anvil.chainId, rpcUrl: anvil.rpcUrl };
      }),
    );
    const manifest = await deployDevnet(endpoints, process.pid);
    writeManifest(opts.manifestPath, manifest);
    return { manifest, owned: true, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
