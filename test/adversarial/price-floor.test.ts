/**
 * Issue 21, finding 2: self-dealing dust. A wallet registers its own merchant at the minimum price and pays it from a
 * second wallet: each settlement burnt ~41k gas of our relayers for nothing. The price floor (gas per settlement x
 * live gas price x native coin price x margin) refuses such a merchant at registration and update, and refuses every
 * payment below it before anything is sent, at the gateway's paid route and at the facilitator, also when the gas
 * price rises under a route registered above it. Run on a devnet of this file's own (it raises Base's gas price).
 * Checked where a victim would look: the relayers' nonces, the merchant's and the payer's balances.
 */
import t from 'tap';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { parseEther, parseUnits, toHex, type Address, type LocalAccount } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../../src/chain/canonical.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { registrationTypedData } from '../../src/gateway/merchants/signature.ts';
import { freshAccount, network, tester } from '../helpers/devnet.ts';
import { relayerTxCount, x402Credential } from '../helpers/paid-gateway.ts';
import { fundedPayer, officialPayment, postJson, requirementsFor, stableBalance } from '../helpers/payments.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';
import { spawnOwnDevnet } from '../helpers/spawn-devnet.ts';

const devnet = await spawnOwnDevnet('price-floor');
t.teardown(() => devnet.stop());
const manifest = devnet.manifest;
const base = network(manifest, CAIP2.base);
const funder = tester('attackMoney');
const GWEI = 10n ** 9n;

/** Fresh relayer keys with gas on every chain of this devnet: their nonces count this file's settlements alone. */
async function relayerKeys(): Promise<{ keys: string; addresses: Address[] }> {
  const keys = [generatePrivateKey(), generatePrivateKey()];
  const addresses = keys.map((k) => privateKeyToAccount(k).address);
  for (const n of Object.values(manifest.networks)) for (const a of addresses) await rpcCall(n.rpcUrl, 'anvil_setBalance', [a, toHex(parseEther('10'))]);
  return { keys: keys.join(','), addresses };
}

const gwRelayers = await relayerKeys();
const facRelayers = await relayerKeys();
// The gas price is read again at most every 200 ms here, so the test need not wait long after moving it.
const FAST_GAS = { GATE402_GAS_PRICE_MAX_AGE_MS: '200', GATE402_RELAYER_WATCH_MS: '3600000' };
const gw = await spawnFacilitator({ part: 'gateway', manifestPath: devnet.manifestPath, env: { GATE402_RELAYER_KEYS: gwRelayers.keys, ...FAST_GAS } });
t.teardown(() => gw.stop());
const fac = await spawnFacilitator({
  manifestPath: devnet.manifestPath,
  env: {
    GATE402_RELAYER_KEYS: facRelayers.keys,
    GATE402_FACILITATOR_RATE_CAPACITY: '100000',
    GATE402_FACILITATOR_RATE_PER_SECOND: '100000',
    GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '1000',
    ...FAST_GAS,
  },
});
t.teardown(() => fac.stop());

const gasPrice = async (): Promise<bigint> => BigInt(await rpcCall<string>(base.rpcUrl, 'eth_gasPrice', []));
/** The devnet floor on Base at gas price `wei`: 82,000 gas x wei x 1 USD per native coin x 1.5, in atoms (rounded up). */
const floorAt = (wei: bigint): bigint => (82_000n * wei * 15n + 10n ** 13n - 1n) / 10n ** 13n;

/** Signs and sends a registration (or update) of `slug` by `owner`: one route `data` at `priceUsd`, selling a 1-byte file. */
async function register(owner: LocalAccount, slug: string, priceUsd: string, action: 'register' | 'update' = 'register'): Promise<{ status: number; json: Record<string, unknown> }> {
  const registration = {
    action,
    slug,
    name: 'Dust shop',
    description: 'sells one byte to its own owner',
    payTo: owner.address,
    networks: [CAIP2.base],
    upstream: { kind: 'file' as const, fileName: 'b.txt', contentType: 'text/plain', contentBase64: Buffer.from('b').toString('base64') },
    routes: [{ route: 'data', methods: ['GET' as const], priceUsd, summary: 'One byte', description: 'One byte', input: '' }],
    nonce: `n-${Math.random()}`,
    issuedAt: Math.floor(Date.now() / 1000),
  };
  const signature = await owner.signTypedData(registrationTypedData(registration as never));
  const a = await postJson(`${gw.url}/api/merchants`, { registration, signature });
  return { status: a.status, json: a.json as Record<string, unknown> };
}

/** Relayer transactions (nonces) of both services on Base, and the balances that would move. */
async function money(payer: Address, payee: Address) {
  return {
    gatewayRelayerTxs: await relayerTxCount(base, gwRelayers.addresses),
    facilitatorRelayerTxs: await relayerTxCount(base, facRelayers.addresses),
    payer: await stableBalance(base, payer),
    payee: await stableBalance(base, payee),
  };
}

const owner = freshAccount();
const slug = `dust-${Date.now().toString(36)}`;

t.test('anvil reports the gas price the devnet floor is chosen for', async (t) => {
  const wei = await gasPrice();
  t.ok(wei >= 1n * GWEI && wei <= 3n * GWEI, `eth_gasPrice ${wei} wei: 1-3 gwei`);
  t.ok(floorAt(wei) > 1n && floorAt(wei) < 5_000n, `floor ${floorAt(wei)} atoms: above 0.000001 USD, below the catalog's cheapest 0.005 USD`);
});

t.test('a merchant at 0.000001 USD is refused at registration, naming the floor', async (t) => {
  const dust = await register(owner, slug, '0.000001');
  t.equal(dust.status, 400, JSON.stringify(dust.json));
  t.match(dust.json.error, /route data: priceUsd 0\.000001 is below the price floor on eip155:8453 is 0\.000\d{3} USD \(\d+ atoms\): 82000 gas x [\d.]+ gwei x 1 USD per native coin x 1\.5 margin/);
  t.equal((await fetch(`${gw.url}/api/merchants/${slug}`)).status, 404, 'nothing was registered');
  const fine = await register(owner, slug, '0.005000');
  t.ok(fine.status === 200 || fine.status === 201, `at 0.005 USD it registers (${fine.status} ${JSON.stringify(fine.json)})`);
});

t.test('an update below the floor is refused, and the merchant keeps its price', async (t) => {
  const update = await register(owner, slug, '0.000010', 'update');
  t.equal(update.status, 400);
  t.match(update.json.error, /below the price floor on eip155:8453/);
  const listed = (await (await fetch(`${gw.url}/api/merchants/${slug}`)).json()) as { routes?: { priceUsd: string }[]; merchant?: { routes: { priceUsd: string }[] } };
  t.equal((listed.merchant ?? listed).routes?.[0]?.priceUsd, '0.005000', `still 0.005 USD (${JSON.stringify(listed).slice(0, 300)})`);
});

t.test('the facilitator refuses an amount below the floor by default, for free', async (t) => {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const payee = freshAccount().address;
  const before = await money(payer.address, payee);
  for (const amount of ['1', '100']) {
    const req = requirementsFor(CAIP2.base, base, payee, amount);
    const body = { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req };
    const v = await postJson(`${fac.url}/verify`, body);
    t.match(v, { status: 200, json: { isValid: false, invalidReason: 'amount_below_price_floor', invalidMessage: /amount \d+ is below the price floor on eip155:8453/ } }, `/verify ${amount} atoms`);
    const s = await postJson(`${fac.url}/settle`, body);
    t.match(s, { status: 200, json: { success: false, errorReason: 'amount_below_price_floor', transaction: '' } }, `/settle ${amount} atoms`);
  }
  t.same(await money(payer.address, payee), before, 'no relayer transaction, nothing moved');
  const req = requirementsFor(CAIP2.base, base, payee, '10000');
  const ok = await postJson(`${fac.url}/verify`, { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req });
  t.match(ok, { status: 200, json: { isValid: true } }, '0.01 USD, above the floor, verifies');
});

t.test('when gas rises above a route price, paid requests to it are refused before any transaction', async (t) => {
  const url = `${gw.url}/m/${slug}/data`;
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const paid = await rawRequest(gw.url, 'GET', `/m/${slug}/data`, { headers: { 'payment-signature': await x402Credential(url, payer, CAIP2.base) } });
  t.equal(paid.status, 200, 'at the gas price it was registered at, the route is paid and served');
  t.equal(await stableBalance(base, owner.address), 5_000n);

  // Gas moves: a base fee of 100 gwei makes one settlement worth ~0.012 USD of gas, above the route's 0.005.
  await rpcCall(base.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [toHex(100n * GWEI)]);
  await rpcCall(base.rpcUrl, 'evm_mine', []);
  const wei = await gasPrice();
  t.ok(floorAt(wei) > 5_000n, `gas price ${wei} wei: floor ${floorAt(wei)} atoms, above the route's 5000`);
  await new Promise((r) => setTimeout(r, 500)); // past the gas price's 200 ms cache

  const before = await money(payer.address, owner.address);
  const ATTEMPTS = 20;
  const reasons: string[] = [];
  for (let i = 0; i < ATTEMPTS; i++) {
    const res = await rawRequest(gw.url, 'GET', `/m/${slug}/data`, { headers: { 'payment-signature': await x402Credential(url, payer, CAIP2.base) } });
    const required = res.headers['payment-required'];
    const said = `${res.body} ${required ? JSON.stringify(decodePaymentRequiredHeader(String(required))) : ''}`;
    reasons.push(`${res.status} ${/amount_below_price_floor/.test(said) ? 'amount_below_price_floor' : said.slice(0, 200)}`);
  }
  t.same(
    reasons,
    Array.from({ length: ATTEMPTS }, () => '402 amount_below_price_floor'),
    `${ATTEMPTS} paid requests: each a 402 saying amount_below_price_floor`,
  );
  const after = await money(payer.address, owner.address);
  t.same(
    after,
    before,
    `no settlement below the floor: relayer transactions ${before.gatewayRelayerTxs} -> ${after.gatewayRelayerTxs}, merchant ${before.payee} -> ${after.payee}, payer kept ${after.payer}`,
  );

  // The facilitator, by default, likewise.
  const req = requirementsFor(CAIP2.base, base, owner.address, '5000');
  const body = { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req };
  t.match(
    await postJson(`${fac.url}/settle`, body),
    { status: 200, json: { success: false, errorReason: 'amount_below_price_floor', transaction: '' } },
    'the facilitator refuses 5000 atoms at this gas price',
  );
  t.same(await money(payer.address, owner.address), before, 'still no relayer transaction');

  const metrics = await (await fetch(`${gw.url}/metrics`)).text();
  const refused = Number(/gate402_price_floor_refusals_total\{network="eip155:8453"\} (\d+)/.exec(metrics)?.[1]);
  t.ok(refused >= ATTEMPTS, `counted in metrics (${refused})`);
  t.match(metrics, /gate402_price_floor_atoms\{network="eip155:8453"\} \d+/, 'the floor is exported');
});
