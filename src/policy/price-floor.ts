/**
 * The price floor: the least a payment must move for its settlement's gas to be paid for. Our relayers pay the gas
 * of every settlement, so a price below what that gas costs lets anyone who pays themselves (a merchant of their own,
 * a second wallet) burn our gas at no cost. Per network:
 *
 *   floor (stablecoin atoms) = ceil( gas per settlement x live gas price (wei) x native coin USD price x margin
 *                                    x 10^stablecoin decimals / 10^18 )
 *
 * (the stablecoin is taken at 1 USD). The gas price is the chain's `eth_gasPrice`, cached per network for a few
 * seconds ({@link GasPriceCache}); while a chain was never read, there is no floor beyond the static minimum (a read
 * that fails keeps the last price read). Applied at merchant registration and update (every route on every network
 * the merchant accepts), and again to every payment before anything is sent (gas moves).
 *
 * | variable | default | meaning |
 * |---|---|---|
 * | `GATE402_NATIVE_USD_EIP155_<chainId>` | devnet: `1`; elsewhere required | USD price of the network's native coin (decimal, at most 6 fraction digits), or `off`: no floor on that network |
 * | `GATE402_SETTLEMENT_GAS_EIP155_<chainId>` | `82000` | gas one settlement is counted at (measured: EIP-3009 44-67k, Permit2 55-82k) |
 * | `GATE402_PRICE_FLOOR_MARGIN` | `1.5` | the floor's multiple of the gas cost (1 to 100, at most 4 fraction digits) |
 * | `GATE402_GAS_PRICE_MAX_AGE_MS` | `3000` | a chain's gas price is read again at most this often |
 * | `GATE402_GAS_PRICE_TIMEOUT_MS` | `2000` | a gas price read that takes longer fails (the last price read is kept) |
 */
import { ConfigError, envInt, envString } from '../config/env.ts';
import type { GasPriceCache } from '../chain/gas-price.ts';
import { formatDecimalAmount, parseDecimalAmount, USD_DECIMALS } from '../protocol/amounts.ts';

const WEI_PER_NATIVE = 10n ** 18n;
const USD_MICROS = 10n ** BigInt(USD_DECIMALS);
const BPS = 10_000n;

export interface FloorInputs {
  /** Gas one settlement is counted at. */
  gas: bigint;
  /** Wei per gas. */
  gasPriceWei: bigint;
  /** USD price of one native coin, in millionths of a USD. */
  nativeUsdMicros: bigint;
  /** The floor's multiple of the gas cost, in basis points (1.5 = 15000). */
  marginBps: bigint;
  /** The stablecoin's decimals (6 for USDC). */
  decimals: number;
}

/** The floor in stablecoin atoms, rounded up: exact to the atom (bigint throughout). */
export function floorAtoms(f: FloorInputs): bigint {
  if (f.gas < 0n || f.gasPriceWei < 0n || f.nativeUsdMicros < 0n || f.marginBps < 0n || !Number.isInteger(f.decimals) || f.decimals < 0)
    throw new RangeError('price floor inputs must not be negative');
  const numerator = f.gas * f.gasPriceWei * f.nativeUsdMicros * f.marginBps * 10n ** BigInt(f.decimals);
  const denominator = WEI_PER_NATIVE * USD_MICROS * BPS;
  return (numerator + denominator - 1n) / denominator;
}

/** One network's floor at one moment, with what it was computed from (for messages and metrics). */
export interface Floor {
  network: string;
  atoms: bigint;
  decimals: number;
  gasPriceWei: bigint;
  gas: bigint;
  nativeUsdMicros: bigint;
  marginBps: bigint;
  /** The gas price is the last one read, older than its maximum age, because reading it again failed. */
  stale: boolean;
}

/**
 * The same network's floor at the same moment for a transaction of `gas` instead of the settlement's counted gas: what
 * a transaction whose gas was measured (simulated as it will be sent) must move to pay for it.
 */
export function floorAtGas(floor: Floor, gas: bigint): Floor {
  return { ...floor, gas, atoms: floorAtoms({ ...floor, gas }) };
}

/** The floor as a price: `0.000246 USD`. */
export function floorUsd(floor: Pick<Floor, 'atoms' | 'decimals'>): string {
  return `${formatDecimalAmount(floor.atoms, floor.decimals)} USD`;
}

/** How a floor was computed, in one line: what a refusal tells the merchant or the payer. */
export function describeFloor(floor: Floor): string {
  const gwei = formatDecimalAmount(floor.gasPriceWei, 9).replace(/\.?0+$/, '');
  const margin = formatDecimalAmount(floor.marginBps, 4).replace(/\.?0+$/, '');
  return `the price floor on ${floor.network} is ${floorUsd(floor)} (${floor.atoms} atoms): ${floor.gas} gas x ${gwei} gwei x ${formatDecimalAmount(floor.nativeUsdMicros, USD_DECIMALS).replace(/\.?0+$/, '')} USD per native coin x ${margin} margin${floor.stale ? ', at the last gas price read' : ''}`;
}

/** Where floors come from: the policy and the merchant registry ask it per network. */
export interface PriceFloorSource {
  /** The current floor of `caip2`; undefined when it has none (switched off, or its gas price was never read). */
  floorOn(caip2: string): Promise<Floor | undefined>;
  /** A payment on `caip2` was refused for being below its floor. */
  refused?(caip2: string): void;
}

// ---------------------------------------------------------------------------------------------
// Settings

export interface NetworkFloorSetting {
  /** Millionths of a USD per native coin; `off`: no floor on this network. */
  nativeUsdMicros: bigint | 'off';
  gas: bigint;
}

export interface PriceFloorConfig {
  /** By CAIP-2 id. */
  networks: Map<string, NetworkFloorSetting>;
  marginBps: bigint;
  maxAgeMs: number;
  timeoutMs: number;
}

/** Gas one settlement is counted at unless configured: the most a Permit2 settlement was measured at. */
export const DEFAULT_SETTLEMENT_GAS = 82_000n;
/** DEVNET ONLY: its native coin is worth nothing; at 1 USD the floor is 0.00012-0.00025 USD at anvil's 1-2 gwei. */
export const DEVNET_NATIVE_USD = '1';
export const DEFAULT_MARGIN = '1.5';

const DECIMAL = /^(0|[1-9][0-9]{0,11})(\.[0-9]{1,6})?$/;

/** `GATE402_NATIVE_USD_EIP155_8453` for `eip155:8453`. */
export function floorVariable(prefix: 'NATIVE_USD' | 'SETTLEMENT_GAS', chainId: number): string {
  return `GATE402_${prefix}_EIP155_${chainId}`;
}

/**
 * The floor's settings for `networks`. Off the devnet (`devnet: false`) every network's native coin price is required
 * (a number, or `off` said explicitly): a gateway that does not know what its gas costs would settle at a loss.
 */
export function priceFloorConfigFromEnv(env: NodeJS.ProcessEnv, networks: readonly { caip2: string; chainId: number }[], opts: { devnet: boolean }): PriceFloorConfig {
  const margin = envString(env, 'GATE402_PRICE_FLOOR_MARGIN', DEFAULT_MARGIN);
  const marginBps = /^[0-9]{1,3}(\.[0-9]{1,4})?$/.test(margin) ? parseDecimalAmount(margin, 4) : undefined;
  if (marginBps === undefined || marginBps < BPS || marginBps > 100n * BPS)
    throw new ConfigError(`GATE402_PRICE_FLOOR_MARGIN must be a number from 1 to 100 with at most 4 fraction digits, got '${margin}'`);
  const settings = new Map<string, NetworkFloorSetting>();
  for (const n of networks) {
    const usdName = floorVariable('NATIVE_USD', n.chainId);
    const raw = envString(env, usdName, opts.devnet ? DEVNET_NATIVE_USD : '');
    if (raw === '')
      throw new ConfigError(`${usdName} is required off the devnet: the USD price of ${n.caip2}'s native coin, for the price floor that keeps settlements above their gas cost (or 'off')`);
    let nativeUsdMicros: bigint | 'off';
    if (raw.toLowerCase() === 'off') nativeUsdMicros = 'off';
    else {
      const micros = DECIMAL.test(raw) ? parseDecimalAmount(raw, USD_DECIMALS) : undefined;
      if (micros === undefined || micros <= 0n) throw new ConfigError(`${usdName} must be a positive USD price with at most 6 fraction digits, or 'off', got '${raw}'`);
      nativeUsdMicros = micros;
    }
    const gasName = floorVariable('SETTLEMENT_GAS', n.chainId);
    const gas = BigInt(envInt(env, gasName, Number(DEFAULT_SETTLEMENT_GAS), { min: 21_000, max: 10_000_000 }));
    settings.set(n.caip2, { nativeUsdMicros, gas });
  }
  return {
    networks: settings,
    marginBps,
    maxAgeMs: envInt(env, 'GATE402_GAS_PRICE_MAX_AGE_MS', 3000, { min: 100, max: 600_000 }),
    timeoutMs: envInt(env, 'GATE402_GAS_PRICE_TIMEOUT_MS', 2000, { min: 100, max: 60_000 }),
  };
}

// ---------------------------------------------------------------------------------------------
// The floors of a running service

export interface PriceFloorsOptions {
  config: PriceFloorConfig;
  /** The stablecoin decimals of each network (a `NetworkRegistry`). */
  networks: { find(caip2: string): { stablecoin: { decimals: number } } | undefined };
  gasPrices: Pick<GasPriceCache, 'price'>;
  /** Told of each floor computed and each payment refused below one (metrics). */
  observe?: { floor(caip2: string, atoms: bigint): void; refused(caip2: string): void };
}

export class PriceFloors implements PriceFloorSource {
  readonly #o: PriceFloorsOptions;

  constructor(opts: PriceFloorsOptions) {
    this.#o = opts;
  }

  async floorOn(caip2: string): Promise<Floor | undefined> {
    const setting = this.#o.config.networks.get(caip2);
    const network = this.#o.networks.find(caip2);
    if (!setting || setting.nativeUsdMicros === 'off' || !network) return undefined;
    const price = await this.#o.gasPrices.price(caip2);
    if (price.wei === undefined) return undefined;
    const inputs = { gas: setting.gas, gasPriceWei: price.wei, nativeUsdMicros: setting.nativeUsdMicros, marginBps: this.#o.config.marginBps, decimals: network.stablecoin.decimals };
    const floor: Floor = { network: caip2, atoms: floorAtoms(inputs), ...inputs, stale: price.stale };
    this.#o.observe?.floor(caip2, floor.atoms);
    return floor;
  }

  refused(caip2: string): void {
    this.#o.observe?.refused(caip2);
  }
}
