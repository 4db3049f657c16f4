import { readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CAIP2 } from '../../src/chain/canonical.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';
import type { DevnetManifest } from '../../src/devnet/manifest.ts';
import { network, testDevnet, TEST_MANIFEST_PATH } from './devnet.ts';
import { spawnPaidGateway, type PaidGateway } from './paid-gateway.ts';
import { startPostgres, type TestDatabase } from './postgres.ts';
import { type RpcGate, startRpcGate } from './rpc-gate.ts';
import { tempDir } from './temp-dir.ts';

/**
 * `gate402 gateway` nodes on one embedded PostgreSQL of this test process, on the shared devnet (or chains of the
 * test's own, `devnet`: a test that reorganises them), serving the built-in
 * catalog from fixture upstreams every node reaches. A node may reach the stock chain through an RPC gate of its own
 * (to hold what it sends or keep what it reads). Everything stops at the test's teardown.
 */
export interface TestCluster {
  manifest: DevnetManifest;
  caip2: string;
  n: NetworkEntry;
  db: TestDatabase;
  fixtures: Awaited<ReturnType<typeof startFixtureUpstreams>>;
  /** The fixture upstreams' origin, the built-in catalog's upstream base. */
  upstream: string;
  /** The cluster environment of node `id` (its store, id and lease term), `env` of the cluster on top. */
  env(id: string): Record<string, string>;
  /** Starts node `id` (through a gate of its own with `gated`); it is stopped (SIGKILL) at teardown. */
  node(id: string, opts?: { gated?: boolean; env?: Record<string, string>; reuse?: Pick<PaidGateway, 'relayerKeys' | 'relayers'> }): Promise<ClusterNode>;
}

export interface ClusterNode extends PaidGateway {
  id: string;
  /** The RPC gate between this node and the stock chain, when it was started gated. */
  gate?: RpcGate;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

export async function startCluster(
  t: Teardown,
  opts: { leaseMs?: number; env?: Record<string, string>; ownServer?: boolean; devnet?: { manifest: DevnetManifest; manifestPath: string } } = {},
): Promise<TestCluster> {
  const manifest = opts.devnet?.manifest ?? testDevnet();
  const manifestOf = opts.devnet?.manifestPath ?? TEST_MANIFEST_PATH;
  const caip2 = CAIP2.stockChain;
  const n = network(manifest, caip2);
  const db = await startPostgres({ own: opts.ownServer });
  t.teardown(() => db.stop());
  const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
  t.teardown(() => fixtures.close());
  const upstream = new URL(fixtures.baseUrlFor('catjoke')).origin;
  const env = (id: string) => ({
    GATE402_STORE_URL: db.url,
    GATE402_NODE_ID: id,
    GATE402_LEASE_MS: String(opts.leaseMs ?? 3000),
    GATE402_CONFIRM_DEADLINE_MS: '100',
    GATE402_STORE_CONNECT_TIMEOUT_MS: '30000',
    ...opts.env,
  });
  return {
    manifest,
    caip2,
    n,
    db,
    fixtures,
    upstream,
    env,
    async node(id, o = {}) {
      let gate: RpcGate | undefined;
      let manifestPath = manifestOf;
      if (o.gated) {
        gate = await startRpcGate(n.rpcUrl);
        t.teardown(() => gate?.close());
        manifestPath = gatedManifest(caip2, gate.url, manifestOf);
      }
      const node = await spawnPaidGateway(manifest, upstream, { ...env(id), ...o.env }, { manifestPath, ...(o.reuse ?? {}) });
      t.teardown(async () => {
        node.gw.child.kill('SIGCONT');
        await node.gw.stop('SIGKILL');
      });
      return { ...node, id, ...(gate ? { gate } : {}) };
    },
  };
}

/** A copy of a devnet's manifest (the test devnet's unless named) whose `caip2` chain is reached at `rpcUrl` (a gate or relay in front of it). */
export function gatedManifest(caip2: string, rpcUrl: string, from: string = TEST_MANIFEST_PATH): string {
  const dir = tempDir('cluster-manifest');
  const manifest = JSON.parse(readFileSync(from, 'utf8'));
  manifest.networks[caip2].rpcUrl = rpcUrl;
  const path = join(dir, 'manifest.json');
  writeFileSync(path, JSON.stringify(manifest));
  return path;
}

/**
 * The local TCP ports of process `pid`'s open sockets (from /proc): the client ports PostgreSQL lists for that
 * process's connections in `pg_stat_activity.client_port`.
 */
export function tcpPortsOf(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m?.[1]) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    let text = '';
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      const local = cols[1];
      const inode = cols[9];
      if (local && inode && inodes.has(inode)) ports.push(Number.parseInt(local.split(':').at(-1) ?? '', 16));
    }
  }
  return ports;
}
