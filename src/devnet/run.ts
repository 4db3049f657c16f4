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
  /**
   * How long the chains of a manifest whose owner process still runs are given to answer before the start gives up
   * (default {@link OWNED_DEVNET_WAIT_MS}); they are never replaced without `fresh`.
   */
  ownedWaitMs?: number;
  log?: (line: string) => void;
}

/**
 * How long a running devnet (its owner process alive) may take to answer before a start that would reuse it gives up:
 * a loaded machine can keep a probe waiting for seconds, and a devnet is never replaced for being slow.
 */
export const OWNED_DEVNET_WAIT_MS = 60_000;
/** Each probe of a running devnet's chains waits this long for an answer at first, twice as long each time after. */
const PROBE_FIRST_MS = 1000;
const PROBE_LONGEST_MS = 8000;

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

/** What a probe of a manifest's chains found: all there, not there (refused, or another chain), or no answer in time. */
type ProbeResult = 'live' | 'gone' | 'unsure';

/** Whether `err` (or what caused it) is a refused connection: nothing listens there. */
function refused(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown; errors?: unknown[] } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (e.code === 'ECONNREFUSED' || e.errors?.some((x) => refused(x))) return true;
  }
  return false;
}

/** Each chain of the manifest asked for its chain id and the stablecoin's code, each call within `timeoutMs`. */
async function probe(manifest: DevnetManifest, timeoutMs: number): Promise<ProbeResult> {
  const results = await Promise.all(
    Object.entries(manifest.networks).map(async ([caip2, n]): Promise<ProbeResult> => {
      try {
        const id = await rpcCall<string>(n.rpcUrl, 'eth_chainId', [], timeoutMs);
        if (Number(id) !== chainIdOf(caip2)) return 'gone';
        const code = await rpcCall<string>(n.rpcUrl, 'eth_getCode', [n.stablecoin.address, 'latest'], timeoutMs);
        return code !== '0x' ? 'live' : 'gone';
      } catch (err) {
        return refused(err) ? 'gone' : 'unsure';
      }
    }),
  );
  if (results.includes('gone')) return 'gone';
  return results.includes('unsure') ? 'unsure' : 'live';
}

/**
 * True when every chain of the manifest answers with its chain id and still holds the deployed contracts, each call
 * within `timeoutMs`.
 */
export async function manifestIsLive(manifest: DevnetManifest, timeoutMs = PROBE_FIRST_MS): Promise<boolean> {
  return (await probe(manifest, timeoutMs)) === 'live';
}

/**
 * What the chains of a running devnet turn out to be within `waitMs`: probed again and again while they do not answer
 * in time, each probe waiting twice as long as the one before (up to {@link PROBE_LONGEST_MS}), so that a machine too
 * busy to answer within a second is waited for rather than taken for dead. A refused connection ends it at once.
 */
async function probeWithin(manifest: DevnetManifest, waitMs: number): Promise<ProbeResult> {
  const deadline = Date.now() + waitMs;
  for (let timeoutMs = PROBE_FIRST_MS; ; timeoutMs = Math.min(timeoutMs * 2, PROBE_LONGEST_MS)) {
    const found = await probe(manifest, timeoutMs);
    const left = deadline - Date.now();
    if (found !== 'unsure' || left <= 0) return found;
    await new Promise((r) => setTimeout(r, Math.min(250, left)));
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
    // Owned by a process that still runs, its chains are that process's: reused once they answer, however long a busy
    // machine makes them take, and never replaced (with new chains and a new manifest under its users' feet) while
    // they may still be there, unless `fresh` says so. A slow answer once made a start deploy chains of its own, and a
    // buyer funded on the running devnet was then refused on the new one for a balance it held. Chains that refuse the
    // connection are gone whoever has the pid now (a manifest left from before a reboot): new ones are started.
    const ownerRuns = previous.pid !== process.pid && alive(previous.pid);
    if (!opts.fresh) {
      const found = ownerRuns ? await probeWithin(previous, opts.ownedWaitMs ?? OWNED_DEVNET_WAIT_MS) : await probe(previous, PROBE_FIRST_MS);
      if (found === 'live') {
        log(`reusing the running devnet of ${opts.manifestPath} (owned by pid ${previous.pid})`);
        return { manifest: previous, owned: false, stop: async () => {} };
      }
      if (ownerRuns && found === 'unsure') {
        throw new Error(`the devnet of ${opts.manifestPath} (pid ${previous.pid}) does not answer; it is left as it is: stop it, or start with --fresh to replace it`);
      }
    }
    if (opts.fresh && previous.pid !== process.pid && alive(previous.pid)) {
      log(`--fresh: stopping the devnet owned by pid ${previous.pid}`);
      process.kill(previous.pid, 'SIGTERM');
      await waitUntilDead(previous.pid, 10_000);
    }
  }

  const chains = await startChains(opts);
  try {
    const manifest = await deployDevnet(chains.endpoints, process.pid);
    writeManifest(opts.manifestPath, manifest);
    return { manifest, owned: true, stop: chains.stop };
  } catch (err) {
    await chains.stop();
    throw err;
  }
}

export interface RunningChains {
  endpoints: Record<string, ChainEndpoint>;
  stop(): Promise<void>;
}

/**
 * The devnet's anvils, one per CAIP-2 id of `ports`, all with the devnet's accounts; `loadState` names the state file
 * a chain starts from (src/devnet/snapshot.ts), when it does not start empty. Should one fail, the others are stopped.
 */
export async function startChains(opts: Pick<DevnetOptions, 'host' | 'ports' | 'blockTime'> & { loadState?: (caip2: string) => string }): Promise<RunningChains> {
  const anvils: RunningAnvil[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(anvils.splice(0).map((a) => a.stop()));
  };
  const endpoints: Record<string, ChainEndpoint> = {};
  const started = await Promise.allSettled(
    Object.entries(opts.ports).map(async ([caip2, port]) => {
      const anvil = await startAnvil({
        chainId: chainIdOf(caip2),
        port,
        host: opts.host,
        mnemonic: DEVNET_TEST_MNEMONIC,
        fundedAccounts: DEVNET_ROLES.fundedAccounts,
        ...(opts.blockTime !== undefined ? { blockTime: opts.blockTime } : {}),
        ...(opts.loadState ? { loadState: opts.loadState(caip2) } : {}),
      });
      anvils.push(anvil);
      endpoints[caip2] = { chainId: anvil.chainId, rpcUrl: anvil.rpcUrl };
    }),
  );
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await stop();
    throw failed.reason;
  }
  return { endpoints, stop };
}
