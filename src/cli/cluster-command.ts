import { spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { NodeSupervisor } from '../cluster/node-supervisor.ts';
import { DEVNET_ROLES, devnetPrivateKey } from '../devnet/accounts.ts';
import { startFixtureUpstreams } from '../devnet/fixtures/server.ts';
import { startEmbeddedPostgres } from '../store/postgres/embedded-server.ts';
import { describeDevnet, startDevnetOrExit } from './devnet-command.ts';
import { type CommonFlags, UsageError } from './flags.ts';
import { stopOnSignal } from './lifetime.ts';

/**
 * `gate402 cluster`: a local cluster to try, on the devnet. An embedded PostgreSQL (in `var/cluster/postgres`, new at
 * each run, as the devnet's chains are) and `nodes` gateways on consecutive ports from `port`, each its own process
 * with its own relayer key (the devnet's relayers 1 to 4, so at most four nodes) and the shared store; the first
 * to start runs the stock desk (every node serves the stock API). A node that exits is started again with backoff (a
 * node exits when it loses its leases, e.g. the database away for a lease term). Ctrl-C stops the nodes, the database
 * and the chains.
 */
export async function runClusterCommand(flags: CommonFlags & { nodes?: string; port?: string }): Promise<void> {
  const count = Number(flags.nodes ?? '3');
  const first = Number(flags.port ?? '8402');
  try {
    if (!Number.isInteger(count) || count < 1 || count > DEVNET_ROLES.relayers.length)
      throw new UsageError(`--nodes must be 1 to ${DEVNET_ROLES.relayers.length} (one devnet relayer each), got '${flags.nodes}'`);
    if (!Number.isInteger(first) || first < 1 || first + count - 1 > 65535) throw new UsageError(`--port must be a port number, got '${flags.port}'`);
  } catch (err) {
    process.stderr.write(`gate402: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const { devnet, manifestPath } = await startDevnetOrExit(flags);
  process.stdout.write(describeDevnet(devnet, manifestPath));
  const dir = resolve('var/cluster');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const postgres = await startEmbeddedPostgres({ dir: resolve(dir, 'postgres') });
  await postgres.createDatabase('gate402');
  const url = postgres.url('gate402');
  // One set of fixture upstreams for every node: the built-in catalog is shared, so its upstreams must be too.
  const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
  const nodes: NodeSupervisor[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.stop()));
    await fixtures.close();
    await postgres.stop();
    await devnet.stop();
  };
  stopOnSignal(stop);
  const lines: string[] = [];
  for (let i = 0; i < count; i++) {
    const port = first + i;
    const node = `node-${i + 1}`;
    const start = () =>
      spawn(process.execPath, [resolve('src/cli/bin.mjs'), 'gateway', '--manifest', manifestPath], {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: {
          ...process.env,
          GATE402_STORE_URL: url,
          GATE402_NODE_ID: node,
          GATE402_GATEWAY_PORT: String(port),
          GATE402_DATA_DIR: resolve(dir, node),
          GATE402_CATALOG_UPSTREAM_BASE: new URL(fixtures.baseUrlFor('catalog')).origin,
          GATE402_RELAYER_KEYS: devnetPrivateKey(DEVNET_ROLES.relayers[i] as number),
          // Every node has the stock desk; the one holding its lease signs with its key, the others hand buys to it.
          GATE402_STOCK_ENABLED: 'true',
        },
      });
    // A node that exits (its leases lost while the database was away: it fences itself by exiting) is started again,
    // with backoff, and rejoins with a new lease epoch (see cluster/node-supervisor.ts).
    nodes.push(new NodeSupervisor({ name: node, start, log: (line) => process.stderr.write(`gate402: ${line}\n`) }));
    lines.push(`  ${node}: http://127.0.0.1:${port}`);
  }
  // Ready when every node answers its health check (a node that exits meanwhile said why on stderr, and starts again).
  const deadline = Date.now() + 120_000;
  for (let i = 0; i < count; i++) {
    for (;;) {
      const up = await fetch(`http://127.0.0.1:${first + i}/health`, { signal: AbortSignal.timeout(1000) }).then(
        (r) => r.ok,
        () => false,
      );
      if (up) break;
      if (Date.now() > deadline) {
        process.stderr.write(`gate402: node-${i + 1} did not start\n`);
        await stop();
        process.exit(1);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  process.stdout.write(
    [
      `cluster: ${count} gateway nodes sharing PostgreSQL ${url.replace(/:[^:@/]+@/, ':***@')}`,
      ...lines,
      '',
      'Pay at one node, then redeem at another:',
      `  npx gate402 pay http://127.0.0.1:${first}/m/catjoke/joke`,
      '',
      'Ctrl-C stops the nodes, the database and the chains',
      '',
    ].join('\n'),
  );
}
