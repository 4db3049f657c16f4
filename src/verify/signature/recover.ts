/**
 * ECDSA public-key recovery on secp256k1 through libsecp256k1 (the `secp256k1` package's native, prebuilt binding),
 * then the Ethereum address of the key, checksummed (EIP-55).
 *
 * Accepted signatures:
 * - 65 bytes `r ‖ s ‖ v` with v ∈ {27, 28}, or v ∈ {0, 1} (the y parity, as some signers emit it; whoever submits
 *   the signature on chain must then normalise v to 27/28: FiatToken's ECRecover and the ecrecover precompile
 *   accept only 27/28);
 * - 64 bytes EIP-2098 compact `r ‖ yParityAndS` (top bit of the second word is the y parity), which Permit2 accepts.
 * High-s signatures (s > n/2) are rejected, as FiatToken's ECRecover and OpenZeppelin's ECDSA do (Permit2 itself does
 * not check, but no standard signer produces them). Anything malformed yields undefined; nothing here throws.
 */
import { createRequire } from 'node:module';
import type { Address, Hex } from 'viem';
import { decodeHex, writeHex } from './bytes.ts';
import { keccak256Bytes } from './keccak.ts';

type Secp256k1 = typeof import('secp256k1');

/**
 * The package's `index.js` silently falls back to a pure-JS implementation (elliptic, ~30x slower) when the native
 * addon does not load; load the binding explicitly so the fallback is visible in `secp256k1Backend`.
 */
function loadSecp256k1(): { lib: Secp256k1; backend: 'native' | 'elliptic' } {
  const require = createRequire(import.meta.url);
  try {
    return { lib: require('secp256k1/bindings.js') as Secp256k1, backend: 'native' };
  } catch {
    return { lib: require('secp256k1/elliptic.js') as Secp256k1, backend: 'elliptic' };
  }
}

const { lib: secp256k1, backend } = loadSecp256k1();

/** Which secp256k1 implementation is in use: `native` (libsecp256k1) unless the prebuilt addon failed to load. */
export const secp256k1Backend: 'native' | 'elliptic' = backend;

/** secp256k1 group order n, halved (floor): the largest s accepted (EIP-2), as 32 big-endian bytes. */
const HALF_N = new Uint8Array(32);
{
  const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
  for (let i = 31, v = n >> 1n; i >= 0; i--, v >>= 8n) HALF_N[i] = Number(v & 0xffn);
}

/** Scratch buffers, reused across calls (everything here is synchronous). */
const SIG = new Uint8Array(64);
const SIG_IN = new Uint8Array(64);
const PUBKEY = new Uint8Array(65);
const PUBKEY_XY = PUBKEY.subarray(1);
const HASH = new Uint8Array(32);
const ADDRESS_ASCII = new Uint8Array(42);
const HEX_LOWER = new Uint8Array(16);
for (let i = 0; i < 16; i++) HEX_LOWER[i] = '0123456789abcdef'.charCodeAt(i);

/** Length of a checksummed address in ASCII: `0x` and 40 hex digits. */
export const ADDRESS_ASCII_BYTES = 42;

/** Whether s (32 bytes, big-endian) is greater than n/2. */
function isHighS(sig: Uint8Array, offset: number): boolean {
  for (let i = 0; i < 32; i++) {
    const a = sig[offset + i] as number;
    const b = HALF_N[i] as number;
    if (a !== b) return a > b;
  }
  return false;
}

/**
 * Parses a hex signature into r ‖ s (64 bytes, s taken out of the compact form) at `out[offset..offset + 64)` and
 * returns the recovery id (0 or 1), or -1 when it is not an acceptable signature (the bytes may then hold anything).
 */
export function writeSignature(signature: unknown, out: Uint8Array, offset: number): number {
  if (typeof signature !== 'string') return -1;
  if (signature.length === 132) {
    if (signature.charCodeAt(0) !== 48 || (signature.charCodeAt(1) | 0x20) !== 120 || !decodeHex(signature, 2, 64, out, offset)) return -1;
    const c0 = signature.charCodeAt(130);
    const c1 = signature.charCodeAt(131);
    // v: 1b / 1c (27, 28) or 00 / 01, in either letter case.
    const v = c0 === 0x31 && (c1 | 0x20) === 0x62 ? 0 : c0 === 0x31 && (c1 | 0x20) === 0x63 ? 1 : c0 === 0x30 && (c1 === 0x30 || c1 === 0x31) ? c1 - 0x30 : -1;
    if (v < 0 || isHighS(out, offset + 32)) return -1;
    return v;
  }
  if (signature.length === 130) {
    // EIP-2098: the top bit of the second word is the y parity; the rest is s.
    if (!writeHex(signature, 64, out, offset)) return -1;
    const recid = (out[offset + 32] as number) >> 7;
    out[offset + 32] = (out[offset + 32] as number) & 0x7f;
    if (isHighS(out, offset + 32)) return -1;
    return recid;
  }
  return -1;
}

/** Writes the EIP-55 checksummed form of the 20 address bytes at `bytes[offset..]`, as 42 ASCII bytes, at `out[outOffset..]`. */
function writeChecksumAscii(bytes: Uint8Array, offset: number, out: Uint8Array, outOffset: number): void {
  for (let i = 0; i < 20; i++) {
    const b = bytes[offset + i] as number;
    ADDRESS_ASCII[2 + 2 * i] = HEX_LOWER[b >> 4] as number;
    ADDRESS_ASCII[3 + 2 * i] = HEX_LOWER[b & 15] as number;
  }
  const h = keccak256Bytes(ADDRESS_ASCII.subarray(2), HASH);
  out[outOffset] = 0x30; // 0
  out[outOffset + 1] = 0x78; // x
  for (let i = 0; i < 40; i++) {
    const c = ADDRESS_ASCII[2 + i] as number;
    // Letters a-f are upper-cased where the matching nibble of the hash is >= 8.
    const nibble = i & 1 ? (h[i >> 1] as number) & 15 : (h[i >> 1] as number) >> 4;
    out[outOffset + 2 + i] = c >= 97 && nibble >= 8 ? c - 32 : c;
  }
}

/**
 * Recovers the key that signed `digest` (32 bytes) with r ‖ s = `rs[rsOffset..rsOffset + 64)` and `recid`, and writes
 * its address, checksummed, as 42 ASCII bytes at `out[outOffset..]`. False when there is no such key (r or s zero or
 * out of range, no curve point with that x); `out` is then untouched.
 */
export function recoverAddressAscii(digest: Uint8Array, rs: Uint8Array, rsOffset: number, recid: number, out: Uint8Array, outOffset: number): boolean {
  for (let i = 0; i < 64; i++) SIG[i] = rs[rsOffset + i] as number;
  try {
    secp256k1.ecdsaRecover(SIG, recid, digest, false, PUBKEY);
  } catch {
    return false;
  }
  keccak256Bytes(PUBKEY_XY, HASH);
  writeChecksumAscii(HASH, 12, out, outOffset);
  return true;
}

/**
 * The address whose key produced `signature` over `digest` (32 bytes), or undefined when the signature is malformed,
 * high-s, has a bad v, or does not recover to a point.
 */
export function recoverSigner(digest: Uint8Array, signature: Hex): Address | undefined {
  if (!(digest instanceof Uint8Array) || digest.length !== 32) return undefined;
  const recid = writeSignature(signature, SIG_IN, 0);
  if (recid < 0) return undefined;
  const ascii = new Uint8Array(ADDRESS_ASCII_BYTES);
  if (!recoverAddressAscii(digest, SIG_IN, 0, recid, ascii, 0)) return undefined;
  return String.fromCharCode.apply(null, ascii as unknown as number[]) as Address;
}

/** Whether a recovered address is the claimed signer (case-insensitive; undefined never matches). */
export function matchesSigner(recovered: string | undefined | null, claimed: string | undefined | null): boolean {
  if (typeof recovered !== 'string' || typeof claimed !== 'string') return false;
  return recovered.length === 42 && recovered.toLowerCase() === claimed.toLowerCase();
}
