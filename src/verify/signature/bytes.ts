/**
 * Small, allocation-free helpers for writing ABI words straight into a byte buffer. Every parser here is strict
 * (exact lengths, hex digits only) and reports failure by returning `false`, so hot paths never pay for a throw.
 */

/** Hex digit value by character code, -1 for anything that is not a hex digit. */
const HEX_VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX_VALUE[48 + i] = i;
for (let i = 0; i < 6; i++) {
  HEX_VALUE[65 + i] = 10 + i;
  HEX_VALUE[97 + i] = 10 + i;
}

const MASK_64 = (1n << 64n) - 1n;
const MAX_UINT256 = (1n << 256n) - 1n;
/** Longest decimal uint256 (2^256 - 1 has 78 digits). */
const MAX_UINT256_DIGITS = 78;

/**
 * Decodes `byteLength` bytes of `0x`-prefixed hex (`hex.length` must be exactly `2 + 2 * byteLength`) into
 * `out[offset..]`. Returns false on a wrong length or a non-hex character (the buffer may then hold partial data).
 */
export function writeHex(hex: string, byteLength: number, out: Uint8Array, offset: number): boolean {
  if (typeof hex !== 'string' || hex.length !== 2 + 2 * byteLength) return false;
  if (hex.charCodeAt(0) !== 48 || (hex.charCodeAt(1) | 0x20) !== 120) return false; // "0x" or "0X"
  return decodeHex(hex, 2, byteLength, out, offset);
}

/**
 * Decodes the `2 * byteLength` hex digits at `hex[charOffset..]` (no prefix; the caller checked the length) into
 * `out[offset..]`. Returns false on a non-hex character (the buffer may then hold partial data).
 */
export function decodeHex(hex: string, charOffset: number, byteLength: number, out: Uint8Array, offset: number): boolean {
  for (let i = 0, c = charOffset; i < byteLength; i++, c += 2) {
    const hiCode = hex.charCodeAt(c);
    const loCode = hex.charCodeAt(c + 1);
    const hi = hiCode < 128 ? (HEX_VALUE[hiCode] as number) : -1;
    const lo = loCode < 128 ? (HEX_VALUE[loCode] as number) : -1;
    if ((hi | lo) < 0) return false;
    out[offset + i] = (hi << 4) | lo;
  }
  return true;
}

/** Writes an address as a left-zero-padded 32-byte ABI word. Accepts any letter case (checksums are not enforced). */
export function writeAddressWord(address: string, out: Uint8Array, offset: number): boolean {
  out.fill(0, offset, offset + 12);
  return writeHex(address, 20, out, offset + 12);
}

/** Writes a bytes32 (`0x` + 64 hex digits) as one ABI word. */
export function writeBytes32(hex: string, out: Uint8Array, offset: number): boolean {
  return writeHex(hex, 32, out, offset);
}

/**
 * Writes a uint256 as a big-endian 32-byte word. Accepts a bigint, a safe non-negative integer number, or a string of
 * decimal digits (the wire form of x402 payloads). Returns false when the value is not a uint256.
 */
export function writeUint256(value: unknown, view: DataView, offset: number): boolean {
  // Fast path, no BigInt: the amounts and times of real payloads are short decimal strings.
  const small = typeof value === 'string' ? smallDecimal(value) : typeof value === 'number' && Number.isSafeInteger(value) ? value : -1;
  if (small >= 0) {
    view.setBigUint64(offset, 0n);
    view.setBigUint64(offset + 8, 0n);
    view.setUint32(offset + 16, 0);
    view.setUint32(offset + 20, 0);
    view.setUint32(offset + 24, Math.floor(small / 0x1_0000_0000));
    view.setUint32(offset + 28, small >>> 0);
    return true;
  }
  const v = toUint256(value);
  if (v === undefined) return false;
  if (v <= MASK_64) {
    view.setBigUint64(offset, 0n);
    view.setBigUint64(offset + 8, 0n);
    view.setBigUint64(offset + 16, 0n);
    view.setBigUint64(offset + 24, v);
  } else {
    view.setBigUint64(offset, v >> 192n);
    view.setBigUint64(offset + 8, (v >> 128n) & MASK_64);
    view.setBigUint64(offset + 16, (v >> 64n) & MASK_64);
    view.setBigUint64(offset + 24, v & MASK_64);
  }
  return true;
}

/** Longest decimal string read without BigInt: 15 digits stay below 2^53. */
const SMALL_DECIMAL_DIGITS = 15;

/** The value of a string of 1 to 15 decimal digits, or -1 for anything else (longer strings go through BigInt). */
function smallDecimal(s: string): number {
  const n = s.length;
  if (n === 0 || n > SMALL_DECIMAL_DIGITS) return -1;
  let v = 0;
  for (let i = 0; i < n; i++) {
    const d = s.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    v = v * 10 + d;
  }
  return v;
}

/** A uint256 from a bigint, a safe integer or a decimal string; undefined for anything else or out of range. */
export function toUint256(value: unknown): bigint | undefined {
  let v: bigint;
  if (typeof value === 'bigint') v = value;
  else if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) return undefined;
    v = BigInt(value);
  } else if (typeof value === 'string') {
    if (!isDecimalDigits(value)) return undefined;
    v = BigInt(value);
  } else return undefined;
  return v >= 0n && v <= MAX_UINT256 ? v : undefined;
}

function isDecimalDigits(s: string): boolean {
  const n = s.length;
  if (n === 0 || n > MAX_UINT256_DIGITS) return false;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}
