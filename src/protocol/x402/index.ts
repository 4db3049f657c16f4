/** x402 v2 protocol codecs: pure, never throwing, schema-validated. */
export * from './codec.ts';
export * from './types.ts';
export * from './schemas.ts';
export * from './headers.ts';
export * from './facilitator-body.ts';
export * from './select.ts';
