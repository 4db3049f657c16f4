/**
 * DEVNET ONLY. The records of a devnet run (payments, nonce claims, orders, sponsorships, merchants) are bound to the
 * chains they were written against. `npm start` after a Ctrl-C starts new chains (anvil keeps nothing), so records
 * kept from the old chains would disagree with them: a sponsorship claimed for the gasless buyer, who has no gas on
 * the new chain; orders naming settlements the new chain never saw. So the data directory starts fresh whenever its
 * chains do, and is kept while they live (a restart of the service against chains still running keeps its records).
 *
 * A chain is named by its genesis block hash: a new anvil has a new genesis time, so a new hash, even with the same
 * chain id, mnemonic and deployment. The names of the chains a data directory belongs to are kept in it, in
 * `chains.json`.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DevnetManifest } from './manifest.ts';
import { rpcCall } from '../chain/rpc.ts';

/** Genesis block hash by CAIP-2 id. */
export type ChainIdentity = Readonly<Record<string, string>>;

export type RecordsVerdict = 'keep' | 'first' | 'reset';

export const CHAINS_FILE = 'chains.json';
/** What a data directory holds that belongs to its chains: the LMDB environment and the merchants' uploaded files. */
export const CHAIN_BOUND_ENTRIES = ['data.mdb', 'lock.mdb', 'merchant-files'] as const;

export function sameChains(a: ChainIdentity, b: ChainIdentity): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

/**
 * What to do with a data directory's records: keep them (they were written on these chains), write down the chains
 * of a directory that holds no records yet, or remove records of other chains (or of chains nobody wrote down).
 */
export function recordsVerdict(recorded: ChainIdentity | undefined, current: ChainIdentity, hasRecords: boolean): RecordsVerdict {
  if (recorded !== undefined && sameChains(recorded, current)) return 'keep';
  return hasRecords ? 'reset' : 'first';
}

/** The genesis block hash of every chain of the manifest. */
export async function chainIdentity(manifest: DevnetManifest): Promise<ChainIdentity> {
  const entries = await Promise.all(
    Object.entries(manifest.networks).map(async ([caip2, n]) => {
      const genesis = await rpcCall<{ hash: string } | null>(n.rpcUrl, 'eth_getBlockByNumber', ['0x0', false]);
      if (!genesis?.hash) throw new Error(`${caip2} at ${n.rpcUrl} has no genesis block`);
      return [caip2, genesis.hash] as const;
    }),
  );
  return Object.fromEntries(entries);
}

function readRecorded(dataDir: string): ChainIdentity | undefined {
  try {
    return (JSON.parse(readFileSync(join(dataDir, CHAINS_FILE), 'utf8')) as { networks: ChainIdentity }).networks;
  } catch {
    return undefined;
  }
}

/**
 * Makes `dataDir` the records of the manifest's chains, before anything opens it: records of other chains are
 * removed. Returns what was done.
 */
export async function bindRecordsToChains(dataDir: string, manifest: DevnetManifest): Promise<RecordsVerdict> {
  const current = await chainIdentity(manifest);
  const verdict = recordsVerdict(
    readRecorded(dataDir),
    current,
    CHAIN_BOUND_ENTRIES.some((e) => existsSync(join(dataDir, e))),
  );
  if (verdict === 'keep') return verdict;
  if (verdict === 'reset') for (const entry of CHAIN_BOUND_ENTRIES) rmSync(join(dataDir, entry), { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(join(dataDir, CHAINS_FILE), `${JSON.stringify({ networks: current }, null, 2)}\n`);
  return verdict;
}
