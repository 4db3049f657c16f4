import { createRequire } from 'node:module';
import { keccak256, type Abi, type Hex } from 'viem';

/** Uniswap V3's own compiled artifacts, deployed exactly as the npm packages ship them. */
export interface NpmArtifact {
  contractName: string;
  abi: Abi;
  bytecode: Hex;
}

const require = createRequire(import.meta.url);

function artifact(json: { contractName: string; abi: Abi; bytecode: Hex }): NpmArtifact {
  return { contractName: json.contractName, abi: json.abi, bytecode: json.bytecode };
}

// Literal paths, so the import-graph test sees which packages this module loads (devDependencies: devnet only).
export const uniswapArtifacts = {
  factory: artifact(require('@uniswap/v3-core/artifacts/contracts/UniswapV3Factory.sol/UniswapV3Factory.json')),
  pool: artifact(require('@uniswap/v3-core/artifacts/contracts/UniswapV3Pool.sol/UniswapV3Pool.json')),
  router: artifact(require('@uniswap/v3-periphery/artifacts/contracts/SwapRouter.sol/SwapRouter.json')),
  quoterV2: artifact(require('@uniswap/v3-periphery/artifacts/contracts/lens/QuoterV2.sol/QuoterV2.json')),
};

/** keccak256 of the pool creation code as shipped: the factory's CREATE2 derives every pool address from it. */
export function poolInitCodeHash(): Hex {
  return keccak256(uniswapArtifacts.pool.bytecode);
}
