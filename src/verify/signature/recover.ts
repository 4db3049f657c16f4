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
import { writeHex } from './bytes.ts';
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

/** The signature's bytes (r ‖ s, with s normalised from the compact form) and the public key, reused across calls. */
const SIG = new Uint8Array(65);
const RS = SIG.subarray(0, 64);
const PUBKEY = new Uint8Array(65);
const PUBKEY_XY = PUBKEY.subarray(1);
const HEX_CHARS = '0123456789abcdef';
const ADDR_ASCII = new Uint8Array(40);
const HASH = new Uint8Array(32);

/** Whether s (32 bytes, big-endian) is greater than n/2. */
function isHighS(sig: Uint8Array, offset: number): boolean {
  for (let i = 0; i < 32; i++) {
    const a = sig[offset + i] as number;
    const b = HALF_N[i] as number;
    if (a !== b) return a > b;
  }
  return false;
}

/** Parses the hex signature into SIG and returns the recovery id, or -1 when it is not an acceptable signature. */
function parseSignature(signature: string): number {
  if (typeof signature !== 'string') return -1;
  if (signature.length === 132) {
    if (!writeHex(signature, 65, SIG, 0)) return -1;
    const v = SIG[64] as number;
    const recid = v === 27 || v === 28 ? v - 27 : v === 0 || v === 1 ? v : -1;
    if (recid < 0 || isHighS(SIG, 32)) return -1;
    return recid;
  }
  if (signature.length === 130) {
    // EIP-2098: the top bit of the second word is the y parity; the rest is s.
    if (!writeHex(signature, 64, SIG, 0)) return -1;
    const recid = (SIG[32] as number) >> 7;
    SIG[32] = (SIG[32] as number) & 0x7f;
    if (isHighS(SIG, 32)) return -1;
    return recid;
  }
  return -1;
}

/** EIP-55 checksummed form of the 20 address bytes at `bytes[offset..offset + 20)`. */
export function checksumAddressFromBytes(bytes: Uint8Array, offset: number): Address {
  for (let i = 0; i < 20; i++) {
    const b = bytes[offset + i] as number;
    ADDR_ASCII[2 * i] = HEX_CHARS.charCodeAt(b >> 4);
    ADDR_ASCII[2 * i + 1] = HEX_CHARS.charCodeAt(b & 15);
  }
  const h = keccak256Bytes(ADDR_ASCII, HASH);
  let out = '0x';
  for (let i = 0; i < 40; i++) {
    const c = ADDR_ASCII[i] as number;
    // Letters a-f are upper-cased where the matching nibble of the hash is >= 8.
    const nibble = i & 1 ? (h[i >> 1] as number) & 15 : (h[i >> 1] as number) >> 4;
    out += String.fromCharCode(c >= 97 && nibble >= 8 ? c - 32 : c);
  }
  return out as Address;
}

/**
 * The address whose key produced `signature` over `digest` (32 bytes), or undefined when the signature is malformed,
 * high-s, has a bad v, or does not recover to a point.
 */
export function recoverSigner(digest: Uint8Array, signature: Hex): Address | undefined {
  if (!(digest instanceof Uint8Array) || digest.length !== 32) return undefined;
  const recid = parseSignature(signature);
  if (recid < 0) return undefined;
  try {
    secp256k1.ecdsaRecover(RS, recid, digest, false, PUBKEY);
  } catch {
    return undefined; // r or s out of range or zero, or no point with that x.
  }
  keccak256Bytes(PUBKEY_XY, HASH);
  return checksumAddressFromBytes(HASH, 12);
}

/** Whether a recovered address is the claimed signer (case-insensitive; undefined never matches). */
export function matchesSigner(recovered: string | undefined | null, claimed: string | undefined | null): boolean {
  if (typeof recovered !== 'string' || typeof claimed !== 'string') return false;
  return recovered.length === 42 && recovered.toLowerCase() === claimed.toLowerCase();
}
