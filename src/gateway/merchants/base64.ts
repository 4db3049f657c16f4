/**
 * Strict base64 for uploads: only the canonical standard-alphabet, padded encoding (what `btoa`,
 * `Buffer.toString('base64')` and `base64 -w0` produce) is accepted, so one file has exactly one text form.
 * Checked by a native round trip instead of a regular expression: a 10 MiB upload decodes in milliseconds.
 */
import { Buffer } from 'node:buffer';

/** The decoded bytes, or `undefined` when `text` is not canonical padded standard base64. Empty text gives empty bytes. */
export function decodeCanonicalBase64(text: string): Uint8Array | undefined {
  if (text.length % 4 !== 0) return undefined;
  const bytes = Buffer.from(text, 'base64');
  if (bytes.toString('base64') !== text) return undefined;
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
