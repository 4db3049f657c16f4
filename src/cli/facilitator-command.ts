import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { readManifest } from '../chain/manifest.ts';
import { networksFromManifest, productionNetworks, type NetworkRegistry } from '../chain/networks.ts';
import { engineConfigFromEnv } from '../engine/create-engine.ts';
import { facilitatorHttpConfigFromEnv } from '../facilitator/config.ts';
import { runFacilitator, type RunningFacilitator } from '../facilitator/run-facilitator.ts';
import { createLogger } from '../log/logger.ts';
import { armExitAfter, stopOnSignal, type CommonFlags } from './devnet-options.ts';

/** Networks from a devnet manifest when one is named or present, else the production configuration. */
export function networksFor(flags: CommonFlags, env: NodeJS.ProcessEnv = process.env): NetworkRegistry {
  const path = flags.manifest ?? env.GATE402_MANIFEST ?? (env.GATE402_NETWORKS_FILE ? undefined : 'var/devnet.json');
  if (path !== undefined) {
    if (!existsSync(path)) throw new Error(`no devnet manifest at ${resolve(path)}: run \`npm run devnet\` first, or configure production networks`);
    return networksFromManifest(readManifest(path));
  }
  return productionNetworks(env);
}

export async function startFacilitatorOrExit(networks: NetworkRegistry): Promise<RunningFacilitator> {
  try {
    return await runFacilitator(networks, engineConfigFromEnv(), facilitatorHttpConfigFromEnv(), createLogger('facilitator'));
  } catch (err) {
    process.stderr.write(`gate402: facilitator failed to start: ${(err as Error).message}\n`);
    process.exit(1);
  }
}

export async function runFacilitatorCommand(flags: CommonFlags): Promise<void> {
  armExitAfter(flags['exit-after']);
  let networks: NetworkRegistry;
  try {
    networks = networksFor(flags);
  } catch (err) {
    process.stderr.write(`gate402: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const facilitator = await startFacilitatorOrExit(networks);
  process.stdout.write(`facilitator: ${facilitator.url} (GET /supported, POST /verify, POST /settle, GET /health)\n`);
  stopOnSignal(() => facilitator.close());
}
