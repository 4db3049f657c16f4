/**
 * The price floor's arithmetic (bigint, exact to the atom), its settings, the gas price cache it reads (fresh, shared,
 * bounded, and falling back to the last price read when the chain does not answer), and the checks that apply it to
 * payments and to merchant routes.
 */
import t from 'tap';
import { GasPriceCache } from '../src/chain/gas-price.ts';
import { ConfigError } from '../src/config/env.ts';
import { checkRoutesAboveFloors } from '../src/gateway/merchants/validate.ts';
import { checkPaymentTerms, stricterPolicy, withoutFloor, type PaymentPolicy } from '../src/policy/payment-policy.ts';
import { describeFloor, floorAtGas, floorAtoms, PriceFloors, priceFloorConfigFromEnv, type Floor, type PriceFloorSource } from '../src/policy/price-floor.ts';

const GWEI = 10n ** 9n;
const USD = 1_000_000n;

t.test('floorAtoms: gas x gas price x native USD x margin, in stablecoin atoms, rounded up to the atom', async (t) => {
  // 82,000 gas at 2 gwei = 0.000164 native; at 1 USD and 1.5x: 0.000246 USD = 246 atoms of a 6-decimal stablecoin.
  t.equal(floorAtoms({ gas: 82_000n, gasPriceWei: 2n * GWEI, nativeUsdMicros: USD, marginBps: 15_000n, decimals: 6 }), 246n);
  // 65,000 gas at 0.01 gwei (an L2), ether at 3,000 USD, 1.5x: 0.00000065 native x 3000 x 1.5 = 0.002925 USD.
  t.equal(floorAtoms({ gas: 65_000n, gasPriceWei: 10_000_000n, nativeUsdMicros: 3000n * USD, marginBps: 15_000n, decimals: 6 }), 2925n);
  // Exact to the atom: one wei of gas price more than an exact multiple rounds up by one atom, never more.
  const exact = { gas: 100_000n, gasPriceWei: 10n * GWEI, nativeUsdMicros: USD, marginBps: 10_000n, decimals: 6 };
  t.equal(floorAtoms(exact), 1000n, '0.001 native at 1 USD: 1000 atoms exactly');
  t.equal(floorAtoms({ ...exact, gasPriceWei: 10n * GWEI + 1n }), 1001n, 'a hair above: the next atom');
  t.equal(floorAtoms({ ...exact, gasPriceWei: 10n * GWEI - 1n }), 1000n, 'a hair below: still 1000 (rounded up)');
  t.equal(floorAtoms({ ...exact, gasPriceWei: 1n }), 1n, 'any cost at all is at least one atom');
  t.equal(floorAtoms({ ...exact, gasPriceWei: 0n }), 0n, 'free gas: no floor');
  t.equal(floorAtoms({ ...exact, decimals: 18 }), 10n ** 15n, 'an 18-decimal stablecoin');
  // Large values stay exact (no float anywhere): 10M gas at 10,000 gwei, native at 100,000 USD, 100x.
  t.equal(floorAtoms({ gas: 10_000_000n, gasPriceWei: 10_000n * GWEI, nativeUsdMicros: 100_000n * USD, marginBps: 1_000_000n, decimals: 6 }), 1_000_000_000_000_000n);
  t.throws(() => floorAtoms({ ...exact, gas: -1n }), RangeError);
});

t.test("floorAtGas: the same moment's floor for a transaction's measured gas", async (t) => {
  const floor: Floor = { network: 'eip155:8453', atoms: 246n, decimals: 6, gasPriceWei: 2n * GWEI, gas: 82_000n, nativeUsdMicros: USD, marginBps: 15_000n, stale: true };
  const claim = floorAtGas(floor, 41_000n);
  t.equal(claim.atoms, 123n, 'half the gas, half the floor');
  t.same({ ...claim, atoms: 0n, gas: 0n }, { ...floor, atoms: 0n, gas: 0n }, 'the gas price, coin price, margin, network and staleness kept');
  t.match(describeFloor(claim), /41000 gas x 2 gwei/, 'and described with the measured gas');
});

t.test('settings: a devnet default, required off the devnet (or off), every mistake named', async (t) => {
  const nets = [
    { caip2: 'eip155:8453', chainId: 8453 },
    { caip2: 'eip155:4663', chainId: 4663 },
  ];
  const devnet = priceFloorConfigFromEnv({}, nets, { devnet: true });
  t.same(devnet.networks.get('eip155:8453'), { nativeUsdMicros: USD, gas: 82_000n }, 'devnet: native coin at 1 USD, 82,000 gas');
  t.equal(devnet.marginBps, 15_000n, 'margin 1.5');
  t.throws(() => priceFloorConfigFromEnv({}, nets, { devnet: false }), { name: 'Error', message: /GATE402_NATIVE_USD_EIP155_8453 is required off the devnet/ });
  t.throws(() => priceFloorConfigFromEnv({ GATE402_NATIVE_USD_EIP155_8453: '3000' }, nets, { devnet: false }), /GATE402_NATIVE_USD_EIP155_4663 is required/);
  const prod = priceFloorConfigFromEnv(
    { GATE402_NATIVE_USD_EIP155_8453: '3512.25', GATE402_NATIVE_USD_EIP155_4663: 'off', GATE402_SETTLEMENT_GAS_EIP155_8453: '67000', GATE402_PRICE_FLOOR_MARGIN: '2' },
    nets,
    { devnet: false },
  );
  t.same(prod.networks.get('eip155:8453'), { nativeUsdMicros: 3_512_250_000n, gas: 67_000n });
  t.same(prod.networks.get('eip155:4663'), { nativeUsdMicros: 'off', gas: 82_000n });
  t.equal(prod.marginBps, 20_000n);
  for (const [name, value] of [
    ['GATE402_NATIVE_USD_EIP155_8453', '0'],
    ['GATE402_NATIVE_USD_EIP155_8453', '-1'],
    ['GATE402_NATIVE_USD_EIP155_8453', '1e3'],
    ['GATE402_NATIVE_USD_EIP155_8453', '0.0000001'],
    ['GATE402_PRICE_FLOOR_MARGIN', '0.5'],
    ['GATE402_PRICE_FLOOR_MARGIN', '101'],
    ['GATE402_SETTLEMENT_GAS_EIP155_8453', '100'],
  ] as const) {
    let thrown: unknown;
    try {
      priceFloorConfigFromEnv({ [name]: value }, nets, { devnet: true });
    } catch (e) {
      thrown = e;
    }
    t.ok(thrown instanceof ConfigError && thrown.message.startsWith(name), `${name}=${value} is refused, naming the variable (${String(thrown)})`);
  }
});

t.test('the gas price cache: one read per period, shared; a failed or slow read keeps the last price', async (t) => {
  let now = 0;
  let reads = 0;
  let answer: () => Promise<bigint> = async () => 2n * GWEI;
  const failures: string[] = [];
  const cache = new GasPriceCache({
    read: () => {
      reads++;
      return answer();
    },
    maxAgeMs: 1000,
    timeoutMs: 50,
    now: () => now,
    failed: (caip2, e) => failures.push(`${caip2}: ${(e as Error).message}`),
  });
  const all = await Promise.all(Array.from({ length: 20 }, () => cache.price('eip155:8453')));
  t.equal(reads, 1, 'twenty askers at once: one read');
  t.ok(
    all.every((p) => p.wei === 2n * GWEI && !p.stale),
    'all get it',
  );
  now = 999;
  await cache.price('eip155:8453');
  t.equal(reads, 1, 'fresh for the period');
  now = 1000;
  answer = async () => 5n * GWEI;
  t.same(await cache.price('eip155:8453'), { wei: 5n * GWEI, stale: false }, 'read again once the period is over: the new price');
  now = 2000;
  answer = async () => {
    throw new Error('connection refused');
  };
  t.same(await cache.price('eip155:8453'), { wei: 5n * GWEI, stale: true }, 'a failed read: the last price, marked stale, and no throw');
  now = 2500;
  await cache.price('eip155:8453');
  t.equal(reads, 3, 'a failing chain is not asked again within the period');
  now = 3000;
  answer = () => new Promise(() => {});
  t.same(await cache.price('eip155:8453'), { wei: 5n * GWEI, stale: true }, 'a read that never answers times out to the last price');
  t.same(await cache.price('eip155:84532'), { wei: undefined, stale: true }, 'a chain never read: no price');
  t.equal(failures.length, 3, `each failure told (${failures.join('; ')})`);
  t.match(failures[1], /timed out/);
});

t.test('PriceFloors: per network, off where switched off, none before the first price', async (t) => {
  const config = priceFloorConfigFromEnv(
    { GATE402_NATIVE_USD_EIP155_4663: 'off' },
    [
      { caip2: 'eip155:8453', chainId: 8453 },
      { caip2: 'eip155:4663', chainId: 4663 },
    ],
    { devnet: true },
  );
  const prices = new Map<string, bigint | undefined>([['eip155:8453', 2n * GWEI]]);
  const seen: string[] = [];
  const floors = new PriceFloors({
    config,
    networks: { find: (c) => (c === 'eip155:8453' || c === 'eip155:4663' ? { stablecoin: { decimals: 6 } } : undefined) },
    gasPrices: { price: async (c) => ({ wei: prices.get(c), stale: false }) },
    observe: { floor: (c, atoms) => seen.push(`${c}=${atoms}`), refused: () => {} },
  });
  const floor = await floors.floorOn('eip155:8453');
  t.equal(floor?.atoms, 246n);
  t.match(describeFloor(floor as Floor), /the price floor on eip155:8453 is 0\.000246 USD \(246 atoms\): 82000 gas x 2 gwei x 1 USD per native coin x 1\.5 margin/);
  t.equal(await floors.floorOn('eip155:4663'), undefined, 'off: no floor');
  prices.set('eip155:8453', undefined);
  t.equal(await floors.floorOn('eip155:8453'), undefined, 'never read: only the static minimum holds');
  t.equal(await floors.floorOn('eip155:1'), undefined, 'a network not configured');
  t.same(seen, ['eip155:8453=246'], 'the floor computed is reported (metrics)');
});

const fixed = (atoms: bigint | undefined): PriceFloorSource & { refusals: number } => {
  const source = {
    refusals: 0,
    floorOn: async (network: string) =>
      atoms === undefined ? undefined : { network, atoms, decimals: 6, gasPriceWei: 2n * GWEI, gas: 82_000n, nativeUsdMicros: USD, marginBps: 15_000n, stale: false },
    refused: () => {
      source.refusals++;
    },
  };
  return source;
};

t.test('a payment below the floor is refused with its own reason; the static checks come first and cost no read', async (t) => {
  const payer = '0x1111111111111111111111111111111111111111';
  const payee = '0x2222222222222222222222222222222222222222';
  const floor = fixed(246n);
  let reads = 0;
  const counting: PriceFloorSource = {
    floorOn: (n) => {
      reads++;
      return floor.floorOn(n);
    },
    refused: floor.refused,
  };
  const policy: PaymentPolicy = { refusedPayees: new Set(), minAmount: 1n, floor: counting };
  const terms = { kind: 'eip3009' as const, payer, payee, network: 'eip155:8453' };
  const below = await checkPaymentTerms(policy, { ...terms, amount: 245n });
  t.same(below.ok ? 'ok' : below.error.code, 'amount_below_price_floor');
  t.match(below.ok ? '' : below.error.message, /amount 245 is below the price floor on eip155:8453 is 0\.000246 USD \(246 atoms\)/);
  t.equal(floor.refusals, 1, 'counted');
  t.ok((await checkPaymentTerms(policy, { ...terms, amount: 246n })).ok, 'at the floor: settled');
  const readsBefore = reads;
  const self = await checkPaymentTerms(policy, { ...terms, payee: payer, amount: 1n });
  t.same(self.ok ? 'ok' : self.error.code, 'payer_is_payee', 'a payment refused on its terms is refused for that');
  t.equal(reads, readsBefore, 'without reading the gas price');
  t.ok((await checkPaymentTerms({ ...policy, floor: fixed(undefined) }, { ...terms, amount: 1n })).ok, 'no floor known: the static minimum only');
  const failing: PriceFloorSource = { floorOn: () => Promise.reject(new Error('boom')) };
  t.ok((await checkPaymentTerms({ ...policy, floor: failing }, { ...terms, amount: 1n })).ok, 'a floor that throws never makes the check throw');
  t.equal(stricterPolicy(policy, { minAmount: 1000n }).floor, counting, 'a stricter policy keeps the floor');
  t.equal(withoutFloor(policy).floor, undefined, 'and it can be left out where no RPC may be spent');
});

t.test('merchant routes: every route on every network at or above its floor, the refusal naming it', async (t) => {
  const floor = (await fixed(246n).floorOn('eip155:8453')) as Floor;
  const routes = [
    { route: 'a', priceUsd: '0.010000' },
    { route: 'b', priceUsd: '0.000246' },
  ];
  t.ok(checkRoutesAboveFloors(routes, [floor]).ok, 'at or above');
  t.ok(checkRoutesAboveFloors([{ route: 'c', priceUsd: '0.000001' }], []).ok, 'no floor known: nothing refused beyond the static bounds');
  const refused = checkRoutesAboveFloors([...routes, { route: 'dust', priceUsd: '0.000001' }], [floor]);
  t.notOk(refused.ok);
  t.match(refused.ok ? '' : refused.error, { code: 'invalid_registration', status: 400, message: /route dust: priceUsd 0\.000001 is below the price floor on eip155:8453 is 0\.000246 USD/ });
});
