import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { readManifest, type DevnetManifest } from '../../src/devnet/manifest.ts';
import { killOnExit, tempDir } from './temp-dir.ts';

export const BIN = resolve('src/cli/bin.mjs');

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

/**
 * A devnet of the calling test file alone (one that pauses mining would stall everyone on the shared one), in a
 * directory of its own so that two runs of the suite side by side do not share it either. `stop` ends its chains
 * and removes the directory; it is safe to call twice.
 */
export async function spawnOwnDevnet(prefix: string): Promise<SpawnedDevnet & { stop(): Promise<void> }> {
  const dir = tempDir(prefix);
  const devnet = await spawnDevnet(join(dir, 'manifest.json'));
  killOnExit(devnet.child, 'SIGTERM');
  return {
    ...devnet,
    async stop() {
      if (devnet.child.exitCode === null && devnet.child.signalCode === null) {
        const exited = new Promise((r) => devnet.child.once('exit', r));
        devnet.child.kill('SIGTERM');
        await exited;
      }
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
