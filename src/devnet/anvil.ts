import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { rpcCall } from '../chain/rpc.ts';

/** Where the anvil binary of the `@foundry-rs/anvil` npm package for this platform lives. */
export function anvilBinaryPath(): string {
  const arch = ({ x64: 'amd64', arm64: 'arm64' } as Record<string, string>)[process.arch];
  const os = ({ linux: 'linux', darwin: 'darwin', win32: 'win32' } as Record<string, string>)[process.platform];
  if (!arch || !os) throw new Error(`anvil has no build for ${process.platform}/${process.arch}`);
  const require = createRequire(import.meta.url);
  const pkg = require.resolve(`@foundry-rs/anvil-${os}-${arch}/package.json`);
  return join(dirname(pkg), 'bin', os === 'win32' ? 'anvil.exe' : 'anvil');
}

export interface AnvilOptions {
  chainId: number;
  port: number;
  host?: string;
  mnemonic: string;
  fundedAccounts: number;
  /** Seconds between blocks; omitted means automine (a block per transaction). */
  blockTime?: number;
  /** A state file (anvil's `--load-state`): the chain starts with the blocks, accounts and code it holds. */
  loadState?: string;
  startTimeoutMs?: number;
}

export interface RunningAnvil {
  readonly chainId: number;
  readonly rpcUrl: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/**
 * setpriv asks the kernel to kill anvil when its parent dies, even by SIGKILL, so no chain outlives the process
 * that started it. Where setpriv is missing, signal handlers in the parent are the only guard.
 */
const SETPRIV = '/usr/bin/setpriv';

export async function startAnvil(opts: AnvilOptions): Promise<RunningAnvil> {
  const host = opts.host ?? '127.0.0.1';
  // Not --quiet: anvil's "Listening on <host>:<port>" line is how we learn that this child, and not another
  // process, holds the port; with port 0 it names the port the kernel gave it (no free port is guessed ahead).
  const args = ['--chain-id', String(opts.chainId), '--port', String(opts.port), '--host', host, '--mnemonic', opts.mnemonic, '--accounts', String(opts.fundedAccounts), '--balance', '10000'];
  if (opts.blockTime !== undefined) args.push('--block-time', String(opts.blockTime));
  if (opts.loadState !== undefined) args.push('--load-state', opts.loadState);
  if (opts.port !== 0) {
    const squatter = await rpcCall<string>(`http://${host}:${opts.port}`, 'eth_chainId', [], 500).catch(() => undefined);
    if (squatter !== undefined) throw new Error(`port ${opts.port} is taken by a running chain (id ${Number(squatter)}); stop it or choose other ports`);
  }
  const binary = anvilBinaryPath();
  const useSetpriv = process.platform === 'linux' && existsSync(SETPRIV);
  const child: ChildProcess = useSetpriv ? spawn(SETPRIV, ['--pdeathsig', 'KILL', binary, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }) : spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const port = await listeningPort(child, exited, opts.startTimeoutMs ?? 20_000).catch((err: Error) => {
    child.kill('SIGKILL');
    throw new Error(`anvil for chain ${opts.chainId} on port ${opts.port}: ${err.message} ${stderr.trim()}`);
  });
  const rpcUrl = `http://${host}:${port}`;
  const id = await rpcCall<string>(rpcUrl, 'eth_chainId', [], 5_000).catch(() => undefined);
  if (id === undefined || Number(id) !== opts.chainId) {
    child.kill('SIGKILL');
    throw new Error(`anvil for chain ${opts.chainId} said it listens on ${rpcUrl}, which answers ${id === undefined ? 'nothing' : `chain ${Number(id)}`}`);
  }

  return {
    chainId: opts.chainId,
    rpcUrl,
    pid: child.pid ?? -1,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * The port of anvil's "Listening on <host>:<port>" line on its stdout; the rest of stdout (its banner) is read and
 * dropped so the pipe never fills. Rejects if anvil exits or stays silent past the deadline.
 */
function listeningPort(child: ChildProcess, exited: Promise<number | null>, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`no "Listening on" line within ${timeoutMs} ms`)), timeoutMs);
    const onData = (chunk: Buffer): void => {
      seen = (seen + chunk.toString()).slice(-4000);
      const m = /Listening on \S*:(\d+)/.exec(seen);
      if (m) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        child.stdout?.resume();
        resolve(Number(m[1]));
      }
    };
    child.stdout?.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`exited (${code}) before listening`));
    });
  });
}
