import { describeDevnet, startDevnetOrExit } from './devnet-command.ts';
import { stopOnSignal, type CommonFlags } from './devnet-options.ts';

/** The embedded default: local chains and contracts, then the service on top of them. */
export async function runStartCommand(flags: CommonFlags): Promise<void> {
  const { devnet, manifestPath } = await startDevnetOrExit(flags);
  process.stdout.write(describeDevnet(devnet, manifestPath));
  process.stdout.write('gate402 is up; Ctrl-C stops it\n');
  stopOnSignal(() => devnet.stop());
}
