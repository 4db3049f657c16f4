import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { BIN } from './spawn-devnet.ts';
import { freePort } from './devnet.ts';
import { killOnExit, tempDir } from './temp-dir.ts';

export interface SpawnedFacilitator {
  child: ChildProcess;
  url: string;
  port: number;
  dataDir: string;
  logPath: string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

type FacilitatorOptions = { manifestPath: string; env?: Record<string, string>; dataDir?: string; port?: number; part?: 'facilitator' | 'gateway' };

/**
 * Runs the real `gate402 facilitator` (or `gate402 gateway`) against a devnet manifest, on a free port, and waits for /health. When
 * another process takes the probed port first, it starts again on a fresh one; when a loaded machine keeps it from
 * answering /health in time, it is killed and started again (three starts at most). A start is given 2 minutes and
 * each /health probe 5 s: on a machine loaded many times over, booting takes over a minute and an answer over a
 * second, and a start killed for being slow only begins again from nothing.
 */
export async function spawnFacilitator(opts: FacilitatorOptions): Promise<SpawnedFacilitator> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnOnce(opts);
    } catch (err) {
      const message = (err as Error).message;
      const again = /did not become healthy/.test(message) || (opts.port === undefined && /cannot listen/.test(message));
      if (attempt >= 3 || !again) throw err;
    }
  }
}

async function spawnOnce(opts: FacilitatorOptions): Promise<SpawnedFacilitator> {
  const port = opts.port ?? (await freePort());
  // A data directory made here is this process's alone and removed at stop; one passed in belongs to the caller.
  const ownsDataDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? tempDir('facilitator');
  const removeOwnDataDir = () => {
    if (ownsDataDir) rmSync(dataDir, { recursive: true, force: true });
  };
  const logPath = join(dataDir, `${opts.part ?? 'facilitator'}-${Date.now()}.log`);
  const log = openSync(logPath, 'a');
  const part = opts.part ?? 'facilitator';
  const portVar = part === 'gateway' ? 'GATE402_GATEWAY_PORT' : 'GATE402_FACILITATOR_PORT';
  const child = spawn(process.execPath, [BIN, part, '--manifest', opts.manifestPath], {
    stdio: ['ignore', log, log],
    // The stock desk is one key per gateway: only a test that gives it its own key turns it on.
    env: { ...process.env, [portVar]: String(port), GATE402_DATA_DIR: dataDir, GATE402_LOG_LEVEL: 'warn', GATE402_STOCK_ENABLED: 'false', ...opts.env },
  });
  killOnExit(child);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) {
      const log = readFileSync(logPath, 'utf8');
      removeOwnDataDir();
      throw new Error(`${part} exited ${child.exitCode}:\n${log}`);
    }
    const ok = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      const log = readFileSync(logPath, 'utf8');
      removeOwnDataDir();
      throw new Error(`${part} did not become healthy:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    child,
    url,
    port,
    dataDir,
    logPath,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill(signal);
        await exited;
      }
      removeOwnDataDir();
    },
  };
}
