/**
 * The networks file (`GATE402_NETWORKS_FILE`): `{ "networks": { "<CAIP-2 id>": NetworkEntry, ... } }`, the same shape
 * as a devnet manifest's `networks`. Checked whole before anything starts; a mistake is named by its JSON path.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import type { NetworkEntry } from './network-types.ts';

const address = { type: 'string', pattern: '^0x[0-9a-fA-F]{40}$' } as const;
const uint = { type: 'integer', minimum: 0 } as const;

/** One network entry: what the service reads of it, each address well-formed. */
export const networkEntrySchema = {
  type: 'object',
  required: ['chainId', 'rpcUrl', 'stablecoin'],
  properties: {
    chainId: { type: 'integer', minimum: 1 },
    rpcUrl: { type: 'string', pattern: '^(https?|wss?)://' },
    stablecoin: {
      type: 'object',
      required: ['address', 'name', 'version', 'decimals', 'symbol'],
      properties: { address, name: { type: 'string', minLength: 1 }, version: { type: 'string', minLength: 1 }, decimals: uint, symbol: { type: 'string', minLength: 1 } },
    },
    permit2: address,
    exactPermit2Proxy: address,
    multicall: address,
    uniswap: {
      type: 'object',
      required: ['factory', 'router', 'quoter', 'weth', 'poolInitCodeHash'],
      properties: { factory: address, router: address, quoter: address, weth: address, poolInitCodeHash: { type: 'string', pattern: '^0x[0-9a-fA-F]{64}$' } },
    },
    stocks: {
      type: 'array',
      items: {
        type: 'object',
        required: ['symbol', 'name', 'address', 'decimals', 'pool', 'fee', 'seedPriceUsd'],
        properties: { symbol: { type: 'string', minLength: 1 }, name: { type: 'string' }, address, decimals: uint, pool: address, fee: uint, seedPriceUsd: { type: 'string' } },
      },
    },
  },
} as const;

const validateFile = new Ajv({ allErrors: true, validateSchema: false }).compile({
  type: 'object',
  required: ['networks'],
  properties: { networks: { type: 'object', propertyNames: { pattern: '^eip155:[0-9]{1,12}$' }, additionalProperties: networkEntrySchema } },
});

/** A JSON document checked by `validate`; throws an Error naming `source`, what it should be, and every mistake. */
export function parseCheckedJson<T>(text: string, source: string, validate: ValidateFunction, what: string): T {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source} is not JSON: ${(err as Error).message}`);
  }
  if (!validate(data)) {
    const why = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
    throw new Error(`${source} is not ${what}: ${why}`);
  }
  return data as T;
}

/** The entries of a networks file's text, by CAIP-2 id; throws an Error naming `source` and every mistake. */
export function parseNetworksFile(text: string, source: string): Record<string, NetworkEntry> {
  const { networks } = parseCheckedJson<{ networks: Record<string, NetworkEntry> }>(text, source, validateFile, 'a networks file');
  for (const [caip2, entry] of Object.entries(networks)) {
    if (caip2 !== `eip155:${entry.chainId}`) throw new Error(`${source}: network ${caip2} says chainId ${entry.chainId}`);
  }
  return networks;
}
