/**
 * Production networks: the networks file (`GATE402_NETWORKS_FILE`) is checked whole before anything starts, and a
 * mistake is named by file and JSON path; setting only an RPC URL (no file) is production too, never a silent fall
 * back to a devnet manifest.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { CAIP2, EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS, USDC_BASE_SEPOLIA_ADDRESS } from '../src/chain/canonical.ts';
import { productionNetworks } from '../src/chain/networks.ts';
import { networksFor } from '../src/cli/facilitator-command.ts';

const dir = mkdtempSync(join(tmpdir(), 'gate402-networks-file-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const write = (name: string, data: unknown): string => {
  const path = join(dir, name);
  writeFileSync(path, typeof data === 'string' ? data : JSON.stringify(data));
  return path;
};

const stablecoin = { address: '0x5fbdb2315678afecb367f032d93f642f64180aa3', name: 'Stock Chain Dollar', version: '1', decimals: 6, symbol: 'SCUSD' };
const stockChain = { chainId: 4663, rpcUrl: 'https://rpc.stock.example', stablecoin };

t.test('a networks file configures its chains; the stock chain gets the canonical Permit2 and proxy', async (t) => {
  const file = write('ok.json', { networks: { [CAIP2.stockChain]: stockChain } });
  const networks = productionNetworks({ GATE402_NETWORKS_FILE: file, GATE402_RPC_EIP155_84532: 'https://sepolia.example' });
  t.same(
    networks
      .all()
      .map((n) => n.caip2)
      .sort(),
    [CAIP2.stockChain, CAIP2.baseSepolia].sort(),
  );
  const stock = networks.get(CAIP2.stockChain);
  t.equal(stock.rpcUrl, 'https://rpc.stock.example');
  t.equal(stock.permit2, PERMIT2_ADDRESS);
  t.equal(stock.exactPermit2Proxy, EXACT_PERMIT2_PROXY_ADDRESS);
  t.equal(networks.get(CAIP2.baseSepolia).stablecoin.address, USDC_BASE_SEPOLIA_ADDRESS, 'Base Sepolia carries Circle USDC');
});

t.test('a wrong networks file is refused, naming the file and what is wrong', async (t) => {
  const cases: Array<[string, unknown, RegExp]> = [
    ['not-json.json', '{"networks":', /not-json\.json is not JSON/],
    ['no-networks.json', { eip155: {} }, /no-networks\.json is not a networks file: \/ must have required property 'networks'/],
    ['bad-id.json', { networks: { stock: stockChain } }, /bad-id\.json is not a networks file: .*must match pattern/],
    ['bad-address.json', { networks: { [CAIP2.stockChain]: { ...stockChain, stablecoin: { ...stablecoin, address: '0x1234' } } } }, /\/networks\/eip155:4663\/stablecoin\/address must match pattern/],
    ['no-rpc.json', { networks: { [CAIP2.stockChain]: { chainId: 4663, stablecoin } } }, /\/networks\/eip155:4663 must have required property 'rpcUrl'/],
    ['half-stock.json', { networks: { [CAIP2.stockChain]: { ...stockChain, stocks: [{ symbol: 'TSLA' }] } } }, /\/networks\/eip155:4663\/stocks\/0 must have required property 'pool'/],
    ['wrong-chain.json', { networks: { [CAIP2.stockChain]: { ...stockChain, chainId: 8453 } } }, /network eip155:4663 says chainId 8453/],
  ];
  for (const [name, data, message] of cases) t.throws(() => productionNetworks({ GATE402_NETWORKS_FILE: write(name, data) }), message, name);
});

t.test('an RPC URL alone is production: no devnet manifest is looked for', async (t) => {
  const found = networksFor({}, { GATE402_RPC_EIP155_84532: 'https://sepolia.example' });
  t.equal(found.manifest, undefined, 'not the devnet');
  t.same(
    found.networks.all().map((n) => n.caip2),
    [CAIP2.baseSepolia],
  );
  const absent = join(dir, 'absent-manifest.json');
  t.throws(
    () => networksFor({ manifest: absent }, { GATE402_RPC_EIP155_84532: 'https://sepolia.example' }),
    /no devnet manifest at .*absent-manifest\.json/,
    'an explicit --manifest still means the devnet',
  );
});
