/** MPP (`Payment` HTTP auth scheme, method `evm`, intent `charge`) codecs: pure, never throwing. */
export * from './types.ts';
export * from './canonical-json.ts';
export * from './challenge.ts';
export * from './credential.ts';
export * from './receipt.ts';
export * from './problems.ts';
export * from './binding.ts';
export * from './www-authenticate.ts';
export * from './challenge-template.ts';
