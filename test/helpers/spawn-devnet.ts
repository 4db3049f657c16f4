import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { readManifest, type DevnetManifest } from '../../src/devnet/manifest.ts';
import { hasDevnetSnapshot, startDevnetFromSnapshot } from '../../src/devnet/snapshot.ts';
import { TEST_DEVNET_SNAPSHOT_DIR } from './devnet.ts';
import { killOnExit, tempDir } from './temp-dir.ts';

export const BIN = resolve('src/cli/bin.mjs');

/**
 * An environment for a gate402 process that is not on the devnet: the test run's own, without any `GATE402_` setting
 * (nothing that could name the test manifest or a devnet key), and `settings`.
 */
export function offDevnetEnv(settings: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('GATE402_')) env[k] = v;
  return Object.assign(env, settings);
}

export interface SpawnedDevnet {
  child: ChildProcess;
  manifest: DevnetManifest;
  manifestPath: string;
  logPath: string;
}

type SpawnOptions = { detached?: boolean; exitAfter?: number; timeoutMs?: number };

/**
 * Runs the real `gate402 devnet` command and waits until its manifest names it as owner. Each chain takes the port
 * the kernel gives it (`--ports 0,0,0`), so two devnets started at once never meet on a guessed port; a start that
 * fails early anyway is retried.
 */
export async function spawnDevnet(manifestPath: string, opts: SpawnOptions = {}): Promise<SpawnedDevnet> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnDevnetOnce(manifestPath, opts);
    } catch (err) {
      if (attempt >= 3 || !(err instanceof EarlyExit)) throw err;
    }
  }
}

export interface OwnDevnet {
  manifest: DevnetManifest;
  manifestPath: string;
  /** The pid of the anvil serving chain `chainId` (Linux: found in /proc among the children of its owner). */
  anvilPid(chainId: number): number;
  stop(): Promise<void>;
}

/** The pid of the anvil child of `owner` that serves chain `chainId`, from /proc. */
function anvilChildOf(owner: number, chainId: number): number {
  const children = readdirSync(`/proc/${owner}/task`).flatMap((task) => readFileSync(`/proc/${owner}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
  const pid = children.find((c) => readFileSync(`/proc/${c}/cmdline`, 'utf8').split('\0').join(' ').includes(`--chain-id ${chainId} `));
  if (pid === undefined) throw new Error(`no anvil of chain ${chainId} under pid ${owner}`);
  return pid;
}

/**
 * A devnet of the calling test file alone (one that pauses mining would stall everyone on the shared one), in a
 * directory of its own so that two runs of the suite side by side do not share it either. Its chains start from the
 * run's snapshot of the shared devnet as deployed (saved by the `before` script): the same contracts, addresses and
 * funded accounts, in anvils of this file's own, without deploying anything again. Without a snapshot (a test file
 * run outside tap) it is a `gate402 devnet` of its own. `stop` ends its chains and removes the directory; it is safe
 * to call twice.
 */
export async function spawnOwnDevnet(prefix: string): Promise<OwnDevnet> {
  const dir = tempDir(prefix);
  const manifestPath = join(dir, 'manifest.json');
  let stopChains: () => Promise<void>;
  let manifest: DevnetManifest;
  let owner = process.pid;
  if (hasDevnetSnapshot(TEST_DEVNET_SNAPSHOT_DIR)) {
    // Its anvils die with this process (src/devnet/anvil.ts) should no teardown come.
    const devnet = await startDevnetFromSnapshot(TEST_DEVNET_SNAPSHOT_DIR, manifestPath);
    manifest = devnet.manifest;
    stopChains = () => devnet.stop();
  } else {
    const devnet = await spawnDevnet(manifestPath);
    killOnExit(devnet.child, 'SIGTERM');
    manifest = devnet.manifest;
    owner = devnet.child.pid ?? -1;
    stopChains = async () => {
      if (devnet.child.exitCode === null && devnet.child.signalCode === null) {
        const exited = new Promise((r) => devnet.child.once('exit', r));
        devnet.child.kill('SIGTERM');
        await exited;
      }
    };
  }
  return {
    manifest,
    manifestPath,
    anvilPid: (chainId) => anvilChildOf(owner, chainId),
    async stop() {
      await stopChains();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

class EarlyExit extends Error {}

async function spawnDevnetOnce(manifestPath: string, opts: SpawnOptions): Promise<SpawnedDevnet> {
  mkdirSync(dirname(manifestPath), { recursive: true });
  rmSync(manifestPath, { force: true });
  const logPath = `${manifestPath}.log`;
  const log = openSync(logPath, 'w');
  const args = [BIN, 'devnet', '--fresh', '--manifest', manifestPath, '--ports', '0,0,0', '--exit-after', String(opts.exitAfter ?? 1800)];
  const child = spawn(process.execPath, args, { stdio: ['ignore', log, log], detached: opts.detached ?? false });
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  for (;;) {
    if (child.exitCode !== null) throw new EarlyExit(`gate402 devnet exited with ${child.exitCode}:\n${readFileSync(logPath, 'utf8')}`);
    if (existsSync(manifestPath)) {
      const manifest = readManifest(manifestPath);
      if (manifest.pid === child.pid) return { child, manifest, manifestPath, logPath };
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`gate402 devnet did not write ${manifestPath} in time:\n${readFileSync(logPath, 'utf8')}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
