/** Standard padded base64 of bytes (what the gateway's headers and uploads expect), without building one huge argument list. */
export function base64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** base64 of the UTF-8 JSON of `value`. */
export function base64Json(value: unknown): string {
  return base64(new TextEncoder().encode(JSON.stringify(value)));
}

export function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** A random 256-bit unsigned integer, as a decimal string (a Permit2 nonce). */
export function randomUint256(): string {
  return BigInt(`0x${hex(crypto.getRandomValues(new Uint8Array(32)))}`).toString();
}
