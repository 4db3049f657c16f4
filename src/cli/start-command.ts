import { networksFromManifest } from '../chain/networks.ts';
import { describeDevnet, startDevnetOrExit } from './devnet-command.ts';
import { stopOnSignal, type CommonFlags } from './devnet-options.ts';
import { startFacilitatorOrExit } from './facilitator-command.ts';

/** The embedded default: local chains and contracts, then the service on top of them. */
export async function runStartCommand(flags: CommonFlags): Promise<void> {
  const { devnet, manifestPath } = await startDevnetOrExit(flags);
  process.stdout.write(describeDevnet(devnet, manifestPath));
  const facilitator = await startFacilitatorOrExit(networksFromManifest(devnet.manifest));
  process.stdout.write(`facilitator: ${facilitator.url}  (try: curl ${facilitator.url}/supported)\n`);
  process.stdout.write('gate402 is up; Ctrl-C stops it\n');
  stopOnSignal(async () => {
    await facilitator.close();
    await devnet.stop();
  });
}
