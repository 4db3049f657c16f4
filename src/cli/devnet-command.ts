import { startDevnet, type Devnet } from '../devnet/run.ts';
import { devnetOptionsFrom } from './devnet-options.ts';
import { UsageError, type CommonFlags } from './flags.ts';
import { armExitAfter, stopOnSignal } from './lifetime.ts';

export function describeDevnet(devnet: Devnet, manifestPath: string): string {
  const lines = [`devnet ${devnet.owned ? 'started' : 'already running'}; manifest: ${manifestPath}`];
  for (const [caip2, n] of Object.entries(devnet.manifest.networks)) {
    lines.push(`  ${caip2.padEnd(13)} ${n.rpcUrl}  ${n.stablecoin.symbol} ${n.stablecoin.address}${n.stocks ? `  ${n.stocks.length} stock pools` : ''}`);
  }
  return `${lines.join('\n')}\n`;
}

export async function startDevnetOrExit(flags: CommonFlags): Promise<{ devnet: Devnet; manifestPath: string }> {
  try {
    armExitAfter(flags['exit-after']);
    const opts = devnetOptionsFrom(flags);
    const devnet = await startDevnet({ ...opts, log: (l) => process.stderr.write(`gate402: ${l}\n`) });
    return { devnet, manifestPath: opts.manifestPath };
  } catch (err) {
    const usage = err instanceof UsageError;
    process.stderr.write(`gate402: ${usage ? '' : 'devnet failed: '}${(err as Error).message}\n`);
    process.exit(usage ? 2 : 1);
  }
}

export async function runDevnetCommand(flags: CommonFlags): Promise<void> {
  const started = Date.now();
  const { devnet, manifestPath } = await startDevnetOrExit(flags);
  process.stdout.write(describeDevnet(devnet, manifestPath));
  if (!devnet.owned) return; // the owner keeps it running; nothing of ours to hold
  process.stdout.write(`ready in ${((Date.now() - started) / 1000).toFixed(1)}s; Ctrl-C stops the chains\n`);
  stopOnSignal(() => devnet.stop());
}
