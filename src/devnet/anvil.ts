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
  const args = [
    '--chain-id', String(opts.chainId),
    '--port', String(opts.port),
    '--host', host,
    '--mnemonic', opts.mnemonic,
    '--accounts', String(opts.fundedAccounts),
    '--balance', '10000',
    '--quiet',
  ];
  if (opts.blockTime !== undefined) args.push('--block-time', String(opts.blockTime));
  const rpcUrl = `http://${host}:${opts.port}`;
  const squatter = await rpcCall<string>(rpcUrl, 'eth_chainId', [], 500).catch(() => undefined);
  if (squatter !== undefined) throw new Error(`port ${opts.port} is taken by a running chain (id ${Number(squatter)}); stop it or choose other ports`);
  const binary = anvilBinaryPath();
  const useSetpriv = process.platform === 'linux' && existsSync(SETPRIV);
  const child: ChildProcess = useSetpriv
    ? spawn(SETPRIV, ['--pdeathsig', 'KILL', binary, ...args], { stdio: ['ignore', 'ignore', 'pipe'] })
    : spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const deadline = Date.now() + (opts.startTimeoutMs ?? 20_000);
  let early: number | null | undefined;
  void exited.then((code) => (early = code));
  for (;;) {
    if (early !== undefined) throw new Error(`anvil for chain ${opts.chainId} exited (${early}) on port ${opts.port}: ${stderr.trim()}`);
    const id = await rpcCall<string>(rpcUrl, 'eth_chainId', [], 500).catch(() => undefined);
    if (id !== undefined) {
      if (Number(id) !== opts.chainId) {
        child.kill('SIGKILL');
        throw new Error(`port ${opts.port} answers chain ${Number(id)}, not ${opts.chainId}: is another chain there?`);
      }
      break;
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`anvil for chain ${opts.chainId} did not answer on ${rpcUrl}: ${stderr.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
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
