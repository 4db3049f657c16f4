/**
 * The project's one result vocabulary: every function that can refuse returns `Ok<T> | Err<Failure<C>>` (written
 * `Result<T, C>`) instead of a hand-made `{ ok: false, ... }` shape. A failure always has a machine-readable `code`
 * (a closed string union per module), a `message` for people and logs, and, where the refusal is an HTTP answer,
 * the `status` to send. The module has no imports, so code which runs in browsers (the web front end's canonical
 * JSON, for instance) can use it.
 *
 * A refusal that is itself a protocol answer (the facilitator's 400 bodies) travels as `Err<ThatAnswer>`; one with
 * more to say than a code and a message extends `Failure` (a refused payment's payer, a send's trail so far).
 *
 * The browser client (src/web/client) uses it too (`format.ts`'s `parseAmount`): the module is bundled for the
 * browser with the pages.
 */

/** A success carrying its value. */
export interface Ok<T> {
  ok: true;
  value: T;
}

/** A refusal carrying its reason. */
export interface Err<E> {
  ok: false;
  error: E;
}

/** Why something was refused: a code from the module's own closed list, a message, and the HTTP status if it is one. */
export interface Failure<C extends string = string> {
  code: C;
  message: string;
  /** The HTTP status a refusal answered over HTTP carries (4xx for the caller's fault, 5xx for ours). */
  status?: number;
}

/** A refusal answered over HTTP: its status is part of it. */
export interface HttpFailure<C extends string = string> extends Failure<C> {
  status: number;
}

/** The result of anything that can refuse: `Ok<T>` or `Err<Failure<C>>`. */
export type Result<T, C extends string = CodecErrorCode> = Ok<T> | Err<Failure<C>>;

export function ok<T>(value: T): Ok<T> {
  return { ok: true, value };
}

/** A refusal with `code` and `message`. */
export function err<C extends string>(code: C, message: string): Err<Failure<C>> {
  return { ok: false, error: { code, message } };
}

/** A refusal answered over HTTP with `status`. */
export function refusal<C extends string>(code: C, message: string, status: number): Err<HttpFailure<C>> {
  return { ok: false, error: { code, message, status } };
}

/**
 * A refusal of something sold for a payment, made before anything was charged: the buyer keeps its credential and
 * may send it again. The one type that says so; {@link unchargedText} is the one place the words are written.
 */
export interface Uncharged<C extends string = string> extends HttpFailure<C> {
  charged: false;
}

/** A refusal before anything was charged, answered over HTTP with `status`. */
export function uncharged<C extends string>(code: C, message: string, status: number): Err<Uncharged<C>> {
  return { ok: false, error: { code, message, status, charged: false } };
}

/** What a buyer reads of an uncharged refusal: its message, and that nothing was charged. */
export function unchargedText(message: string): string {
  return `${message}; nothing was charged`;
}

/**
 * The codes a protocol decoder may return.
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

/** A codec's refusal. */
export type CodecError = Failure<CodecErrorCode>;

/** A codec's refusal as a `Result` (the codecs' name for {@link err}). */
export function fail<T = never>(code: CodecErrorCode, message: string): Result<T> {
  return err(code, message);
}
