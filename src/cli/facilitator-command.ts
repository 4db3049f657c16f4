import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { bindRecordsToChains } from '../devnet/chain-bound-records.ts';
import { networksFromManifest, readManifest, type DevnetManifest } from '../devnet/manifest.ts';
import { productionNetworks, productionNetworksConfigured, type NetworkRegistry } from '../chain/networks.ts';
import { requireProductionSecrets } from '../config/production-secrets.ts';
import { isPublicTestKey } from '../devnet/accounts.ts';
import type { CommonFlags } from './flags.ts';
import { armExitAfter, stopOnSignal } from './lifetime.ts';
import type { RunningService, ServiceOptions } from './service.ts';

/** Networks from a devnet manifest when one is named or present, else the production configuration. */
export function networksFor(flags: CommonFlags, env: NodeJS.ProcessEnv = process.env): { networks: NetworkRegistry; manifest?: DevnetManifest } {
  const path = flags.manifest ?? env.GATE402_MANIFEST ?? (productionNetworksConfigured(env) ? undefined : 'var/devnet.json');
  if (path !== undefined) {
    if (!existsSync(path)) throw new Error(`no devnet manifest at ${resolve(path)}: run \`npm run devnet\` first, or configure production networks`);
    const manifest = readManifest(path);
    return { networks: networksFromManifest(manifest), manifest };
  }
  return { networks: productionNetworks(env) };
}

/**
 * Starts the service, or exits with one line saying why. The service's modules (the engine, the gateway, the
 * store, metrics: most of a start's CPU) load only once the missing-secret checks have passed: a refused start off
 * the devnet took 2.3 CPU s with them loaded first (`startService` checks the same again, for its other callers).
 */
export async function startServiceOrExit(opts: ServiceOptions): Promise<RunningService> {
  try {
    if (!opts.manifest) requireProductionSecrets(process.env, opts, opts.networks, isPublicTestKey);
    if (opts.manifest) await startRecordsWithChains(opts.manifest);
    const { startService } = await import('./service.ts');
    return await startService(opts);
  } catch (err) {
    process.stderr.write(`gate402: failed to start: ${(err as Error).message}\n`);
    process.exit(1);
  }
}

/** On a devnet, the data directory holds the records of its chains only: new chains, new records (docs/devnet.md, "Restarts start fresh"). */
async function startRecordsWithChains(manifest: DevnetManifest): Promise<void> {
  const { engineConfigFromEnv } = await import('../engine/create-engine.ts');
  const { createLogger } = await import('../log/logger.ts');
  const { dataDir, store } = engineConfigFromEnv();
  const verdict = await bindRecordsToChains(dataDir, manifest);
  if (store.location.url) {
    // A shared database outlives any one devnet: its records are the operator's to drop.
    if (verdict !== 'keep') createLogger('gate402').warn('the devnet chains are new, but records in GATE402_STORE_URL are kept: use a fresh database for fresh chains');
  } else if (verdict === 'reset') {
    createLogger('gate402').warn('the devnet chains are new: the records of the previous chains were removed', { dataDir });
  }
}

/** `gate402 facilitator` or `gate402 gateway`: one part of the service against running chains. */
export async function runPartCommand(part: 'facilitator' | 'gateway', flags: CommonFlags): Promise<void> {
  armExitAfter(flags['exit-after']);
  let found: ReturnType<typeof networksFor>;
  try {
    found = networksFor(flags);
  } catch (err) {
    process.stderr.write(`gate402: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const service = await startServiceOrExit({ ...found, facilitator: part === 'facilitator', gateway: part === 'gateway' });
  if (service.facilitatorUrl) process.stdout.write(`facilitator: ${service.facilitatorUrl} (GET /supported, POST /verify, POST /settle, GET /health)\n`);
  if (service.gatewayUrl) process.stdout.write(`gateway: ${service.gatewayUrl} (GET /openapi.json, /m/{slug}/...)\n`);
  stopOnSignal(() => service.close());
}
