import { decodeAbiParameters, encodeAbiParameters, toFunctionSelector, type AbiFunction, type AbiParameter, type DecodeAbiParametersReturnType, type Hex } from 'viem';

/**
 * One contract function's calldata, encoded and decoded with its selector hashed once. viem's `encodeFunctionData`
 * and `decodeFunctionData` format and keccak-hash the function's signature on every call (a fifth of what encoding a
 * settlement call costs); the arguments are encoded and checked by viem all the same.
 */
export interface FunctionCall<F extends AbiFunction> {
  readonly selector: Hex;
  encode(args: DecodeAbiParametersReturnType<F['inputs']>): Hex;
  /** The arguments of `data`; undefined when it calls another function or does not decode. */
  decode(data: Hex): DecodeAbiParametersReturnType<F['inputs']> | undefined;
}

export function functionCall<const F extends AbiFunction>(fn: F): FunctionCall<F> {
  const selector = toFunctionSelector(fn);
  return {
    selector,
    encode: (args) => `${selector}${encodeAbiParameters(fn.inputs as readonly AbiParameter[], args as readonly unknown[]).slice(2)}` as Hex,
    decode: (data) => {
      if (data.length < 10 || data.slice(0, 10) !== selector) return undefined;
      try {
        return decodeAbiParameters(fn.inputs as readonly AbiParameter[], `0x${data.slice(10)}`) as DecodeAbiParametersReturnType<F['inputs']>;
      } catch {
        return undefined;
      }
    },
  };
}
