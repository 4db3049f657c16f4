/**
 * The result type of the pure protocol codecs (see `x402/codec.ts`), in a module of its own with no imports, so that
 * code which runs in browsers (the web front end's canonical JSON, for instance) can use it.
 */

/**
 * The codes a decoder may return.
 *
 * | code | meaning |
 * |---|---|
 * | `too_large` | input longer than the limit; rejected before any decoding |
 * | `not_base64` | not (standard or url-safe) base64, or empty |
 * | `not_json` | bytes are not UTF-8, or the text is not JSON |
 * | `invalid_shape` | JSON does not match the schema; the message starts with the failing field path (JSON pointer) |
 * | `unsupported_version` | `x402Version` is a number other than 2 |
 * | `unsupported_scheme` | x402 `scheme` other than `exact` |
 * | `unsupported_network` | x402 `network` is not `eip155:<chainId>` |
 * | `unsupported_method` | MPP `method`/`intent` other than `evm`/`charge` |
 * | `invalid_syntax` | an HTTP auth header that does not follow the RFC 9110 challenge/credential grammar |
 * | `missing_scheme` | the header holds no `Payment` challenge/credential |
 * | `duplicate_parameter` | an auth-param appears twice in one challenge |
 * | `missing_parameter` | a required auth-param is absent |
 * | `invalid_parameter` | an auth-param is present but malformed (e.g. `expires` not RFC 3339) |
 * | `invalid_value` | an encoder was given a value outside the schema (encoders that validate return this) |
 * | `invalid_signature` | a signed receipt's signature does not verify |
 * | `signer_mismatch` | a signed receipt names another signer than the expected one |
 */
export type CodecErrorCode =
  | 'too_large'
  | 'not_base64'
  | 'not_json'
  | 'invalid_shape'
  | 'unsupported_version'
  | 'unsupported_scheme'
  | 'unsupported_network'
  | 'unsupported_method'
  | 'invalid_syntax'
  | 'missing_scheme'
  | 'duplicate_parameter'
  | 'missing_parameter'
  | 'invalid_parameter'
  | 'invalid_value'
  | 'invalid_signature'
  | 'signer_mismatch';

export interface CodecError {
  code: CodecErrorCode;
  message: string;
}

export type Result<T> = { ok: true; value: T } | { ok: false; error: CodecError };

export function ok<T>(value: T): Result<T> {
  return { ok: true, value };
}

export function fail<T = never>(code: CodecErrorCode, message: string): Result<T> {
  return { ok: false, error: { code, message } };
}
