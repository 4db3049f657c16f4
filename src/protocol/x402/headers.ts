/**
 * x402 v2 header codecs: `PAYMENT-REQUIRED`, `PAYMENT-SIGNATURE`, `PAYMENT-RESPONSE`.
 *
 * Wire format (same as `@x402/core/http` 2.27 `encode*Header`/`decode*Header`): standard base64 of the
 * UTF-8 JSON text. The official encoder is `btoa` over the UTF-8 bytes of `JSON.stringify(value)` (so
 * always `=`-padded); the official decoder only accepts `^[A-Za-z0-9+/]*={0,2}$` and then `JSON.parse`s
 * without validation.
 *
 * Encoding: standard base64 with `=` padding, exactly as the official encoder.
 * Decoding (decision): accept standard base64 with or without padding, and also the url-safe alphabet
 * (`-`/`_`, not mixed with `+`/`/`), because some non-official clients send it and nothing is ambiguous;
 * reject whitespace, empty and malformed lengths with `not_base64`. Input over {@link MAX_HEADER_BYTES}
 * characters is `too_large` before any decoding. The JSON is then validated by the schemas in
 * `schemas.ts`.
 */
import { MAX_HEADER_BYTES, decodeBase64Json, encodeBase64, utf8, type Result } from './codec.ts';
import { validatePaymentPayload, validatePaymentRequired, validateSettleResponse } from './schemas.ts';
import type { PaymentPayload, PaymentRequired, SettleResponse } from './types.ts';

export const PAYMENT_REQUIRED_HEADER = 'PAYMENT-REQUIRED';
export const PAYMENT_SIGNATURE_HEADER = 'PAYMENT-SIGNATURE';
export const PAYMENT_RESPONSE_HEADER = 'PAYMENT-RESPONSE';

function encodeJsonHeader(value: unknown): string {
  return encodeBase64(utf8(JSON.stringify(value)));
}

function decodeJsonHeader<T>(text: unknown, validate: (v: unknown) => Result<T>, maxChars: number): Result<T> {
  const json = decodeBase64Json(text, maxChars, 'either');
  return json.ok ? validate(json.value) : json;
}

export function encodePaymentRequiredHeader(pr: PaymentRequired): string {
  return encodeJsonHeader(pr);
}

export function decodePaymentRequiredHeader(text: string, maxChars: number = MAX_HEADER_BYTES): Result<PaymentRequired> {
  return decodeJsonHeader(text, validatePaymentRequired, maxChars);
}

export function encodePaymentSignatureHeader(p: PaymentPayload): string {
  return encodeJsonHeader(p);
}

export function decodePaymentSignatureHeader(text: string, maxChars: number = MAX_HEADER_BYTES): Result<PaymentPayload> {
  return decodeJsonHeader(text, validatePaymentPayload, maxChars);
}

export function encodePaymentResponseHeader(s: SettleResponse): string {
  return encodeJsonHeader(s);
}

export function decodePaymentResponseHeader(text: string, maxChars: number = MAX_HEADER_BYTES): Result<SettleResponse> {
  return decodeJsonHeader(text, validateSettleResponse, maxChars);
}
