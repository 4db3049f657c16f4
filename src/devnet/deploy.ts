import { getAddress, maxUint256, type Address, type Hex } from 'viem';
import {
  BATCH_SETTLEMENT_ADDRESS,
  CAIP2,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  EXACT_PERMIT2_PROXY_ADDRESS,
  MULTICALL3_ADDRESS,
  PERMIT2_ADDRESS,
  PERMIT2_DEPOSIT_COLLECTOR_ADDRESS,
} from '../chain/canonical.ts';
import {
  erc3009DepositCollectorArtifact,
  exactPermit2ProxyArtifact,
  multicallArtifact,
  permit2Artifact,
  permit2DepositCollectorArtifact,
  poolSeederArtifact,
  stablecoinArtifact,
  stockTokenArtifact,
  weth9Artifact,
  x402BatchSettlementArtifact,
} from './contracts/artifacts/index.ts';
import { poolInitCodeHash, uniswapArtifacts } from './contracts/uniswap.ts';
import type { DevnetManifest, ManifestAccount } from './manifest.ts';
import type { NetworkEntry, StablecoinInfo, StockInfo } from '../chain/network-types.ts';
import { rpcCall } from '../chain/rpc.ts';
import { fullRangeLiquidityForStable, fullRangeTicks, sqrtPriceX96ForStockPrice, uniswapPoolAddress } from '../chain/uniswap-math.ts';
import { parseDecimalAmount, USD_DECIMALS } from '../protocol/amounts.ts';
import { DEVNET_ROLES, devnetAccount, devnetPrivateKey } from './accounts.ts';
import { DEVNET_STOCKS } from './stock-catalog.ts';
import { Submitter } from './submitter.ts';

export interface ChainEndpoint {
  chainId: number;
  rpcUrl: string;
}

/** The stablecoins the devnet deploys: EIP-712 names and versions as the real tokens have them on each network. */
export const DEVNET_STABLECOINS: Record<string, Omit<StablecoinInfo, 'address' | 'decimals'>> = {
  [CAIP2.base]: { name: 'USD Coin', version: '2', symbol: 'USDC' },
  [CAIP2.baseSepolia]: { name: 'USDC', version: '2', symbol: 'USDC' },
  [CAIP2.stockChain]: { name: 'Stock Chain Dollar', version: '1', symbol: 'SCUSD' },
};

const usd = (whole: number): bigint => BigInt(whole) * 10n ** BigInt(USD_DECIMALS);
/** Stablecoin each funded buyer receives on every chain. */
export const BUYER_STABLE_FUNDING = usd(10_000);
/** Stablecoin B the gasless buyer receives on the stock chain (and nothing else). */
export const GASLESS_BUYER_FUNDING = usd(1_000);
/** Stablecoin side of each stock pool: deep enough that a 1,000-unit order moves the price by about 0.04%. */
export const POOL_STABLE_DEPTH = usd(5_000_000);
export const STOCK_POOL_FEE = 3000;

const buyers = (): Address[] => DEVNET_ROLES.buyers.map((i) => devnetAccount(i).address);
const testers = (): Address[] => DEVNET_ROLES.testers.map((i) => devnetAccount(i).address);

/** Native gas of a tester above anvil's funded range (in wei): as much as anvil gives the funded ones. */
const TESTER_GAS = 10_000n * 10n ** 18n;

/** Gives gas to the testers anvil does not fund itself. */
async function gasUnfundedTesters(rpcUrl: string): Promise<void> {
  for (const index of DEVNET_ROLES.testers) {
    if (index < DEVNET_ROLES.fundedAccounts) continue;
    await rpcCall(rpcUrl, 'anvil_setBalance', [devnetAccount(index).address, `0x${TESTER_GAS.toString(16)}`]);
  }
}

async function deployStablecoin(deployer: Submitter, caip2: string): Promise<StablecoinInfo> {
  const spec = DEVNET_STABLECOINS[caip2];
  if (!spec) throw new Error(`no devnet stablecoin for ${caip2}`);
  const address = await deployer.deploy(stablecoinArtifact, [spec.name, spec.symbol, spec.version, deployer.address]);
  for (const buyer of buyers()) await deployer.call(address, stablecoinArtifact.abi, 'mint', [buyer, BUYER_STABLE_FUNDING]);
  for (const tester of testers()) await deployer.call(address, stablecoinArtifact.abi, 'setMinter', [tester, true]);
  return { address, ...spec, decimals: USD_DECIMALS };
}

/** Deploys a contract, then places its runtime code at the canonical address the official clients hard-code. */
async function placeAtCanonical(deployer: Submitter, rpcUrl: string, artifact: { abi: readonly unknown[]; bytecode: Hex }, canonical: Address): Promise<void> {
  const deployed = await deployer.deploy(artifact);
  const code = await deployer.client.getCode({ address: deployed });
  if (!code || code === '0x') throw new Error(`no code at ${deployed}`);
  await rpcCall(rpcUrl, 'anvil_setCode', [canonical, code]);
}

/**
 * The x402 `batch-settlement` contracts at their canonical addresses: the settlement contract and both deposit
 * collectors (the Permit2 one is of use where Permit2 stands, the stock chain).
 */
async function placeBatchSettlement(deployer: Submitter, rpcUrl: string): Promise<void> {
  await placeAtCanonical(deployer, rpcUrl, x402BatchSettlementArtifact, BATCH_SETTLEMENT_ADDRESS);
  await placeAtCanonical(deployer, rpcUrl, erc3009DepositCollectorArtifact, ERC3009_DEPOSIT_COLLECTOR_ADDRESS);
  await placeAtCanonical(deployer, rpcUrl, permit2DepositCollectorArtifact, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS);
}

async function deployStockChain(endpoint: ChainEndpoint, deployer: Submitter): Promise<NetworkEntry> {
  const caip2 = CAIP2.stockChain;
  const stablecoin = await deployStablecoin(deployer, caip2);
  await gasUnfundedTesters(endpoint.rpcUrl);
  await placeAtCanonical(deployer, endpoint.rpcUrl, multicallArtifact, MULTICALL3_ADDRESS);
  await placeAtCanonical(deployer, endpoint.rpcUrl, permit2Artifact, PERMIT2_ADDRESS);
  await placeAtCanonical(deployer, endpoint.rpcUrl, exactPermit2ProxyArtifact, EXACT_PERMIT2_PROXY_ADDRESS);

  const weth = await deployer.deploy(weth9Artifact);
  const factory = await deployer.deploy(uniswapArtifacts.factory);
  const router = await deployer.deploy(uniswapArtifacts.router, [factory, weth]);
  const quoter = await deployer.deploy(uniswapArtifacts.quoterV2, [factory, weth]);
  const seeder = await deployer.deploy(poolSeederArtifact);

  const stable = stablecoin.address;
  await deployer.call(stable, stablecoinArtifact.abi, 'mint', [deployer.address, POOL_STABLE_DEPTH * BigInt(DEVNET_STOCKS.length) * 2n]);
  await deployer.call(stable, stablecoinArtifact.abi, 'approve', [seeder, maxUint256]);

  const stocks: StockInfo[] = [];
  const { tickLower, tickUpper } = fullRangeTicks(STOCK_POOL_FEE);
  for (const seed of DEVNET_STOCKS) {
    const token = await deployer.deploy(stockTokenArtifact, [seed.name, seed.symbol, deployer.address]);
    await deployer.call(token, stockTokenArtifact.abi, 'mint', [deployer.address, 10n ** 24n]);
    await deployer.call(token, stockTokenArtifact.abi, 'approve', [seeder, maxUint256]);
    await deployer.call(factory, uniswapArtifacts.factory.abi, 'createPool', [token, stable, STOCK_POOL_FEE]);
    const pool = uniswapPoolAddress(factory, token, stable, STOCK_POOL_FEE, poolInitCodeHash());
    const registered = (await deployer.client.readContract({ address: factory, abi: uniswapArtifacts.factory.abi, functionName: 'getPool', args: [token, stable, STOCK_POOL_FEE] })) as Address;
    if (getAddress(registered) !== pool) throw new Error(`factory put the ${seed.symbol} pool at ${registered}, CREATE2 says ${pool}`);
    const price = parseDecimalAmount(seed.priceUsd, USD_DECIMALS);
    if (price === undefined) throw new Error(`bad seed price ${seed.priceUsd}`);
    const stableIsToken0 = stable.toLowerCase() < token.toLowerCase();
    const sqrtPriceX96 = sqrtPriceX96ForStockPrice(price, 18, stableIsToken0);
    await deployer.call(pool, uniswapArtifacts.pool.abi, 'initialize', [sqrtPriceX96]);
    const liquidity = fullRangeLiquidityForStable(POOL_STABLE_DEPTH, sqrtPriceX96, stableIsToken0);
    await deployer.call(seeder, poolSeederArtifact.abi, 'seed', [pool, tickLower, tickUpper, liquidity]);
    stocks.push({ symbol: seed.symbol, name: seed.name, address: token, decimals: 18, pool, fee: STOCK_POOL_FEE, seedPriceUsd: seed.priceUsd });
  }

  // Demo buyers approve Permit2 once, so their payments are signatures only. The gasless buyer does not.
  for (const index of DEVNET_ROLES.buyers) {
    const buyer = new Submitter(endpoint.chainId, endpoint.rpcUrl, devnetAccount(index));
    await buyer.call(stable, stablecoinArtifact.abi, 'approve', [PERMIT2_ADDRESS, maxUint256]);
  }
  await deployer.call(stable, stablecoinArtifact.abi, 'mint', [devnetAccount(DEVNET_ROLES.gaslessBuyer).address, GASLESS_BUYER_FUNDING]);
  // Last, so the deployer's nonces (and so every address above) stay what they were before these contracts came.
  await placeBatchSettlement(deployer, endpoint.rpcUrl);

  return {
    chainId: endpoint.chainId,
    rpcUrl: endpoint.rpcUrl,
    stablecoin,
    permit2: PERMIT2_ADDRESS,
    exactPermit2Proxy: EXACT_PERMIT2_PROXY_ADDRESS,
    multicall: MULTICALL3_ADDRESS,
    uniswap: { factory, router, quoter, weth, poolInitCodeHash: poolInitCodeHash() },
    stocks,
  };
}

async function deployStablecoinChain(caip2: string, endpoint: ChainEndpoint, deployer: Submitter): Promise<NetworkEntry> {
  const stablecoin = await deployStablecoin(deployer, caip2);
  await gasUnfundedTesters(endpoint.rpcUrl);
  await placeAtCanonical(deployer, endpoint.rpcUrl, multicallArtifact, MULTICALL3_ADDRESS);
  await placeBatchSettlement(deployer, endpoint.rpcUrl);
  return { chainId: endpoint.chainId, rpcUrl: endpoint.rpcUrl, stablecoin, multicall: MULTICALL3_ADDRESS };
}

/** Deploys and funds everything on three fresh chains and returns the manifest that describes them. */
export async function deployDevnet(chains: Record<string, ChainEndpoint>, ownerPid: number): Promise<DevnetManifest> {
  const entries = await Promise.all(
    Object.entries(chains).map(async ([caip2, endpoint]) => {
      const deployer = new Submitter(endpoint.chainId, endpoint.rpcUrl, devnetAccount(DEVNET_ROLES.deployer));
      const entry = caip2 === CAIP2.stockChain ? await deployStockChain(endpoint, deployer) : await deployStablecoinChain(caip2, endpoint, deployer);
      return [caip2, entry] as const;
    }),
  );
  const account = (index: number, extra: Partial<ManifestAccount> = {}): ManifestAccount => ({ address: devnetAccount(index).address, ...extra });
  return {
    version: 1,
    createdAt: new Date().toISOString(),
    pid: ownerPid,
    networks: Object.fromEntries(entries),
    accounts: {
      relayers: DEVNET_ROLES.relayers.map((i) => account(i)),
      buyers: [
        ...DEVNET_ROLES.buyers.map((i) => account(i, { privateKey: devnetPrivateKey(i) })),
        account(DEVNET_ROLES.gaslessBuyer, { privateKey: devnetPrivateKey(DEVNET_ROLES.gaslessBuyer), gasless: true }),
      ],
      merchants: DEVNET_ROLES.merchants.map((i) => account(i)),
    },
  };
}
