import { networksFromManifest } from '../devnet/manifest.ts';
import { describeDevnet, startDevnetOrExit } from './devnet-command.ts';
import type { CommonFlags } from './flags.ts';
import { stopOnSignal } from './lifetime.ts';
import { startServiceOrExit } from './facilitator-command.ts';

/** The embedded default: local chains and contracts, then the facilitator and the gateway on one engine. */
export async function runStartCommand(flags: CommonFlags): Promise<void> {
  const { devnet, manifestPath } = await startDevnetOrExit(flags);
  process.stdout.write(describeDevnet(devnet, manifestPath));
  const service = await startServiceOrExit({ networks: networksFromManifest(devnet.manifest), manifest: devnet.manifest, facilitator: true, gateway: true });
  const gw = service.gatewayUrl as string;
  process.stdout.write(
    [
      `facilitator: ${service.facilitatorUrl}   (curl ${service.facilitatorUrl}/supported)`,
      `gateway:     ${gw}   (curl ${gw}/openapi.json)`,
      '',
      'Try a paid request as a devnet buyer:',
      `  curl -i ${gw}/m/catjoke/joke            # 402 with both challenges`,
      `  npx gate402 pay ${gw}/m/catjoke/joke    # pays with x402 on eip155:4663 and prints the receipt`,
      '',
      'gate402 is up; Ctrl-C stops it',
      '',
    ].join('\n'),
  );
  stopOnSignal(async () => {
    await service.close();
    await devnet.stop();
  });
}
