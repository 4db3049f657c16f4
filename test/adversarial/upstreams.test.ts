/**
 * A self-registered merchant points its upstream at what shares the gateway's host on the devnet: the chain RPCs
 * (with their `anvil_*` methods), a facilitator, the gateway itself. Only the fixture upstreams the devnet started
 * may be used; everything else on loopback is refused at registration, whatever the spelling of the address.
 */
import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';
import { registrationTypedData } from '../../src/gateway/merchants/signature.ts';
import { freshAccount, network, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { gassedKey } from '../helpers/stock.ts';

const manifest = testDevnet();
const n = network(manifest, CAIP2.stockChain);
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());
// Something else listening on loopback (as a facilitator would): it must never be called.
let bystanderCalls = 0;
const bystander = createServer((_req, res) => {
  bystanderCalls++;
  res.end('{}');
});
await new Promise<void>((r) => bystander.listen(0, '127.0.0.1', () => r()));
t.teardown(() => new Promise<void>((r) => bystander.close(() => r())));
const bystanderPort = (bystander.address() as AddressInfo).port;

const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: TEST_MANIFEST_PATH,
  env: { GATE402_RELAYER_KEYS: await gassedKey(n), GATE402_CATALOG_UPSTREAM_BASE: new URL(fixtures.baseUrlFor('catjoke')).origin },
});
t.teardown(() => gw.stop());

async function register(baseUrl: string): Promise<{ status: number; text: string; slug: string }> {
  const owner = freshAccount();
  const registration = {
    action: 'register' as const,
    slug: `up-${owner.address.slice(2, 12).toLowerCase()}`,
    name: 'Upstream probe',
    description: 'Where may an upstream live?',
    payTo: owner.address,
    networks: [CAIP2.stockChain],
    upstream: { kind: 'url' as const, baseUrl, secretHeaders: {} },
    routes: [{ route: 'rpc', methods: ['GET' as const, 'POST' as const], priceUsd: '0.010000', summary: 'Probe', description: 'Probe', input: 'none' }],
    nonce: `n-${Math.random()}`,
    issuedAt: Math.floor(Date.now() / 1000),
  };
  const signature = await owner.signTypedData(registrationTypedData(registration as never));
  const res = await fetch(`${gw.url}/api/merchants`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ registration, signature }) });
  return { status: res.status, text: await res.text(), slug: registration.slug };
}

t.test('a merchant upstream on a chain RPC, the gateway or another loopback service is refused', async (t) => {
  // (Registrations are rate limited to a burst of 20 per address: the list stays under that.)
  const refused: string[] = Object.values(manifest.networks).map((net) => net.rpcUrl);
  const rpcPort = new URL(n.rpcUrl).port;
  refused.push(`http://localhost:${rpcPort}/`, `http://[::1]:${rpcPort}/`, `http://[::ffff:127.0.0.1]:${rpcPort}/`, `http://0x7f000001:${rpcPort}/`);
  const gwPort = new URL(gw.url).port;
  refused.push(gw.url, `${gw.url}/m/catjoke`, `http://localhost:${gwPort}/`, `http://127.0.0.1:${bystanderPort}/`, 'http://127.0.0.1/', 'http://127.0.0.1:80/', 'https://127.0.0.1/');
  for (const baseUrl of refused) {
    const r = await register(baseUrl);
    t.equal(r.status, 400, `${baseUrl} is refused: ${r.text}`);
    t.equal((await fetch(`${gw.url}/m/${r.slug}/rpc`)).status, 404, 'and no merchant exists');
  }
  t.equal(bystanderCalls, 0, 'the loopback service was never called');
});

t.test('the fixture upstreams the devnet serves its catalog from are allowed', async (t) => {
  const r = await register(fixtures.baseUrlFor('catjoke'));
  t.ok([200, 201].includes(r.status), r.text);
  t.equal((await fetch(`${gw.url}/m/${r.slug}/rpc`)).status, 402, 'the new merchant asks to be paid');
  t.equal((await fetch(`${gw.url}/m/catjoke/joke`)).status, 402, 'the built-in catalog is served');
});
