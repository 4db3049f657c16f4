import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { Ajv } from 'ajv';
import type { Address, Hex } from 'viem';
import type { NetworkEntry } from '../chain/network-types.ts';
import { networkEntrySchema, parseCheckedJson } from '../chain/networks-file.ts';
import { networksFromEntries, type NetworkRegistry } from '../chain/networks.ts';

export interface ManifestAccount {
  address: Address;
  privateKey?: Hex;
  gasless?: boolean;
}

/** What `gate402 devnet` and `gate402 start` write: the local chains, their contracts and the demo accounts. */
export interface DevnetManifest {
  version: 1;
  createdAt: string;
  /** The process that owns the chains (the `gate402 devnet` or `gate402 start` that launched them). */
  pid: number;
  networks: Record<string, NetworkEntry>;
  accounts: {
    relayers: ManifestAccount[];
    buyers: ManifestAccount[];
    merchants: ManifestAccount[];
  };
}

const account = { type: 'object', required: ['address'], properties: { address: { type: 'string', pattern: '^0x[0-9a-fA-F]{40}$' } } } as const;
const manifestSchema = {
  type: 'object',
  required: ['version', 'networks', 'accounts', 'pid'],
  properties: {
    version: { const: 1 },
    pid: { type: 'integer' },
    networks: { type: 'object', additionalProperties: networkEntrySchema },
    accounts: {
      type: 'object',
      required: ['relayers', 'buyers', 'merchants'],
      properties: {
        relayers: { type: 'array', items: account },
        buyers: { type: 'array', items: account },
        merchants: { type: 'array', items: account },
      },
    },
  },
} as const;
// The schema is ours and fixed: checking it against JSON Schema's meta-schema (compiling that first) on every load is
// most of what reading a manifest costs a one-shot command such as `gate402 pay`.
const validateManifest = new Ajv({ allErrors: true, validateSchema: false }).compile(manifestSchema);

export function parseManifest(text: string, source = 'manifest'): DevnetManifest {
  return parseCheckedJson<DevnetManifest>(text, source, validateManifest, 'a devnet manifest');
}

export function readManifest(path: string): DevnetManifest {
  return parseManifest(readFileSync(path, 'utf8'), path);
}

/** Written to a temporary file and renamed, so a reader never sees half a manifest. */
export function writeManifest(path: string, manifest: DevnetManifest): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(manifest, null, 2)}\n`);
  renameSync(tmp, path);
}

/** The devnet's networks as the service sees them. */
export function networksFromManifest(manifest: DevnetManifest): NetworkRegistry {
  return networksFromEntries(manifest.networks);
}
