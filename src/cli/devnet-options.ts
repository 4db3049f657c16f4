import { resolve } from 'node:path';
import { SUPPORTED_NETWORKS } from '../chain/canonical.ts';
import { DEFAULT_DEVNET_PORTS, type DevnetOptions } from '../devnet/run.ts';
import { positiveNumber, UsageError, type CommonFlags } from './flags.ts';

/** Devnet options from flags, then environment, then defaults. */
export function devnetOptionsFrom(flags: CommonFlags, env: NodeJS.ProcessEnv = process.env): DevnetOptions {
  const portsText = flags.ports ?? env.GATE402_DEVNET_PORTS;
  let ports = DEFAULT_DEVNET_PORTS;
  if (portsText) {
    const list = portsText.split(',').map((p) => Number(p.trim()));
    if (list.length !== SUPPORTED_NETWORKS.length || list.some((p) => !Number.isInteger(p) || p < 0 || p > 65535)) {
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
