import { resolve } from 'node:path';
import { SUPPORTED_NETWORKS } from '../chain/canonical.ts';
import { DEFAULT_DEVNET_PORTS, type DevnetOptions } from '../devnet/run.ts';

export interface CommonFlags {
  fresh?: boolean;
  manifest?: string;
  ports?: string;
  host?: string;
  'block-time'?: string;
  'exit-after'?: string;
}

export class UsageError extends Error {}

function positiveNumber(text: string, what: string): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`${what} must be a non-negative number, got '${text}'`);
  return n;
}

/** Devnet options from flags, then environment, then defaults. */
export function devnetOptionsFrom(flags: CommonFlags, env: NodeJS.ProcessEnv = process.env): DevnetOptions {
  const portsText = flags.ports ?? env.GATE402_DEVNET_PORTS;
  let ports = DEFAULT_DEVNET_PORTS;
  if (portsText) {
    const list = portsText.split(',').map((p) => Number(p.trim()));
    if (list.length !== SUPPORTED_NETWORKS.length || list.some((p) => !Number.isInteger(p) || p < 1 || p > 65535)) {
      throw new UsageError(`--ports takes ${SUPPORTED_NETWORKS.length} ports separated by commas, got '${portsText}'`);
    }
    ports = Object.fromEntries(SUPPORTED_NETWORKS.map((id, i) => [id, list[i] as number]));
  }
  const blockTime = flags['block-time'] ?? env.GATE402_DEVNET_BLOCK_TIME;
  return {
    manifestPath: resolve(flags.manifest ?? env.GATE402_MANIFEST ?? 'var/devnet.json'),
    host: flags.host ?? env.GATE402_DEVNET_HOST ?? '127.0.0.1',
    ports,
    fresh: flags.fresh ?? false,
    ...(blockTime !== undefined && blockTime !== '' ? { blockTime: positiveNumber(blockTime, '--block-time') } : {}),
  };
}

/**
 * A guard for unattended runs (tests, CI): after `seconds`, the process exits whatever it is doing. Armed before
 * anything starts, so a hung start cannot outlive it either; chains die with the process (see src/devnet/anvil.ts).
 */
export function armExitAfter(seconds: string | undefined): void {
  if (seconds === undefined) return;
  const ms = positiveNumber(seconds, '--exit-after') * 1000;
  setTimeout(() => {
    process.stderr.write(`gate402: --exit-after ${seconds}s reached\n`);
    process.kill(process.pid, 'SIGTERM');
  }, ms).unref();
}

/** Runs `stop` once on Ctrl-C, SIGTERM or SIGHUP, then exits. Everything the command started goes down with it. */
export function stopOnSignal(stop: () => Promise<void>): void {
  let stopping = false;
  const shutdown = (why: string): void => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`gate402: ${why}, stopping\n`);
    stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`gate402: stop failed: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('interrupted'));
  process.on('SIGTERM', () => shutdown('terminated'));
  process.on('SIGHUP', () => shutdown('hung up'));
  // Stay alive until a signal: the chains are child processes, which do not hold the event loop.
  setInterval(() => {}, 1 << 30);
}
