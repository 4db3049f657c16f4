import { createRequire } from 'node:module';
import { keccak256, type Abi, type Hex } from 'viem';

/** Uniswap V3's own compiled artifacts, deployed exactly as the npm packages ship them. */
export interface NpmArtifact {
  contractName: string;
  abi: Abi;
  bytecode: Hex;
}

const require = createRequire(import.meta.url);

function load(path: string): NpmArtifact {
  const json = require(path) as { contractName: string; abi: Abi; bytecode: Hex };
  return { contractName: json.contractName, abi: json.abi, bytecode: json.bytecode };
}

export const uniswapArtifacts = {
  factory: load('@uniswap/v3-core/artifacts/contracts/UniswapV3Factory.sol/UniswapV3Factory.json'),
  pool: load('@uniswap/v3-core/artifacts/contracts/UniswapV3Pool.sol/UniswapV3Pool.json'),
  router: load('@uniswap/v3-periphery/artifacts/contracts/SwapRouter.sol/SwapRouter.json'),
  quoterV2: load('@uniswap/v3-periphery/artifacts/contracts/lens/QuoterV2.sol/QuoterV2.json'),
};

/** keccak256 of the pool creation code as shipped: the factory's CREATE2 derives every pool address from it. */
export function poolInitCodeHash(): Hex {
  return keccak256(uniswapArtifacts.pool.bytecode);
}
