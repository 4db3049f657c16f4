/**
 * The stock desk calls contracts with small ABIs of its own (src/stock/contract-abis.ts), not with the devnet's
 * compiled artifacts. Each of its functions must be exactly a function of the contract it is called on, as compiled
 * (Uniswap V3 from its npm packages, Permit2 from the devnet's build): same name, argument and result types, and
 * mutability. A mismatch would encode a call the contract does not have, or decode its answer wrongly.
 */
import t from 'tap';
import type { Abi, AbiFunction, AbiParameter } from 'viem';
import { toFunctionSelector } from 'viem';
import { permit2Artifact } from '../src/devnet/contracts/artifacts/index.ts';
import { uniswapArtifacts } from '../src/devnet/contracts/uniswap.ts';
import { nonceBitmapAbi } from '../src/schemes/permit2/abi.ts';
import { quoterV2Abi, swapRouterAbi, uniswapV3FactoryAbi, uniswapV3PoolAbi } from '../src/stock/contract-abis.ts';

/** A parameter's canonical type, tuples spelled out: `(address,uint24)[]`. */
function typeOf(p: AbiParameter): string {
  const components = (p as { components?: readonly AbiParameter[] }).components;
  return components ? p.type.replace(/^tuple/, `(${components.map(typeOf).join(',')})`) : p.type;
}

function shape(f: AbiFunction): string {
  return `${f.name}(${f.inputs.map(typeOf).join(',')}) ${f.stateMutability} returns (${f.outputs.map(typeOf).join(',')})`;
}

const pairs: Array<[string, Abi, Abi]> = [
  ['UniswapV3Pool', uniswapV3PoolAbi, uniswapArtifacts.pool.abi],
  ['UniswapV3Factory', uniswapV3FactoryAbi, uniswapArtifacts.factory.abi],
  ['QuoterV2', quoterV2Abi, uniswapArtifacts.quoterV2.abi],
  ['SwapRouter', swapRouterAbi, uniswapArtifacts.router.abi],
  ['Permit2', nonceBitmapAbi, permit2Artifact.abi as unknown as Abi],
];

for (const [contract, small, compiled] of pairs) {
  t.test(contract, async (t) => {
    const functions = compiled.filter((i): i is AbiFunction => i.type === 'function');
    for (const f of small.filter((i): i is AbiFunction => i.type === 'function')) {
      const match = functions.find((c) => toFunctionSelector(c) === toFunctionSelector(f));
      t.ok(match, `${contract} has ${f.name} with the selector the desk encodes`);
      if (match) t.equal(shape(f), shape(match), `${contract}.${f.name} as compiled`);
    }
  });
}
