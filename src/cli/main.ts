import { parseArgs } from 'node:util';

const USAGE = `gate402 <command> [options]

Commands:
  start     the whole service on its embedded default (local chains, contracts, and the service)
  devnet    the three local chains and their contracts only, for tools and tests
  facilitator  the open facilitator alone (/supported, /verify, /settle) on a devnet manifest or production networks
  gateway   the marketplace alone (paid routes under /m/{slug}/, discovery) on a devnet manifest or production networks
  cluster   a local cluster to try: the devnet, an embedded PostgreSQL and N gateway nodes on consecutive ports
  pay       pay for one request as a buyer (official x402 or MPP client) and print the receipt
  help      this text

Options of start and devnet:
  --fresh              start new chains even if the manifest's chains are running
  --manifest <path>    where the devnet manifest is written (env GATE402_MANIFEST, default var/devnet.json)
  --ports <a,b,c>      RPC ports of eip155:8453, eip155:84532, eip155:4663 (env GATE402_DEVNET_PORTS, default 8545,8546,8547; 0 lets each chain take a free port)
  --host <ip>          interface the chains listen on (env GATE402_DEVNET_HOST, default 127.0.0.1)
  --block-time <s>     seconds per block (default: a block per transaction)
  --exit-after <s>     stop by itself after this many seconds (a guard for test runs)

Options of cluster (besides those of devnet):
  --nodes <n>          gateway nodes, 1 to 4 (default 3)
  --port <p>           the first node's port; the others follow (default 8402)
`;

export function fail(message: string): never {
  process.stderr.write(`gate402: ${message}\n`);
  process.exit(2);
}

// `pay` never comes here: bin.mjs runs it from its bundle, without tsx.
const [command, ...rest] = process.argv.slice(2);
const { values } = (() => {
  try {
    return parseArgs({
      args: rest,
      options: {
        fresh: { type: 'boolean', default: false },
        manifest: { type: 'string' },
        ports: { type: 'string' },
        host: { type: 'string' },
        'block-time': { type: 'string' },
        'exit-after': { type: 'string' },
        nodes: { type: 'string' },
        port: { type: 'string' },
      },
      strict: true,
    });
  } catch (err) {
    return fail(`${(err as Error).message}\n\n${USAGE}`);
  }
})();

// Each command loads only its own modules: `devnet` and `start` bring the devnet (anvil, deployment, Uniswap's
// artifacts from devDependencies), which a production install of `facilitator` or `gateway` does not have.
switch (command) {
  case 'devnet':
    await (await import('./devnet-command.ts')).runDevnetCommand(values);
    break;
  case 'facilitator':
  case 'gateway':
    await (await import('./facilitator-command.ts')).runPartCommand(command, values);
    break;
  case 'cluster':
    await (await import('./cluster-command.ts')).runClusterCommand(values);
    break;
  case 'start':
    await (await import('./start-command.ts')).runStartCommand(values);
    break;
  case undefined:
  case 'help':
  case '--help':
    process.stdout.write(USAGE);
    break;
  default:
    fail(`unknown command '${command}'\n\n${USAGE}`);
}
