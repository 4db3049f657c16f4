/**
 * EIP-712 digests of the two signed messages x402's `exact` scheme uses (protocols.md sections 2 and 3), written as
 * direct ABI word writes into preallocated buffers followed by keccak-256, with type hashes computed once and domain
 * separators cached per token. Equivalent to viem's `hashTypedData` for the same domain, types and message (the tests
 * check this on random inputs), several times faster.
 *
 * The `try*` variants return undefined on malformed input; the plain ones throw a TypeError.
 * Addresses are accepted in any letter case (the digest does not depend on it; checksums are not enforced).
 */
import type { Address, Hex } from 'viem';
import { toUint256, writeAddressWord, writeBytes32, writeUint256 } from './bytes.ts';
import { keccak256Bytes } from './keccak.ts';

/** A uint256 as a bigint, a safe integer, or a string of decimal digits (the x402 wire form). */
export type Uint256Like = bigint | number | string;

export interface Eip3009Domain {
  name: string;
  version: string;
  chainId: Uint256Like;
  verifyingContract: Address;
}

export interface Eip3009Authorization {
  from: Address;
  to: Address;
  value: Uint256Like;
  validAfter: Uint256Like;
  validBefore: Uint256Like;
  nonce: Hex;
}

export interface Permit2Domain {
  chainId: Uint256Like;
  /** The Permit2 contract. */
  verifyingContract: Address;
}

/** The flat form of an x402 Permit2 witness transfer (see `Permit2Authorization` in jobs.ts for the wire form). */
export interface Permit2WitnessMessage {
  token: Address;
  amount: Uint256Like;
  spender: Address;
  nonce: Uint256Like;
  deadline: Uint256Like;
  witnessTo: Address;
  witnessValidAfter: Uint256Like;
}

const utf8 = new TextEncoder();

/** keccak-256 of bytes, as a fresh 32-byte array (see keccak.ts). */
export function keccakBytes(data: Uint8Array): Uint8Array {
  return keccak256Bytes(data);
}

function keccakUtf8(s: string): Uint8Array {
  return keccakBytes(utf8.encode(s));
}

// ---- type hashes, computed once -------------------------------------------------------------------------------

export const EIP712_DOMAIN_TYPE = 'EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)';
export const PERMIT2_DOMAIN_TYPE = 'EIP712Domain(string name,uint256 chainId,address verifyingContract)';
export const TRANSFER_WITH_AUTHORIZATION_TYPE = 'TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)';
export const TOKEN_PERMISSIONS_TYPE = 'TokenPermissions(address token,uint256 amount)';
export const WITNESS_TYPE = 'Witness(address to,uint256 validAfter)';
export const PERMIT_WITNESS_TRANSFER_FROM_TYPE = `PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline,Witness witness)${TOKEN_PERMISSIONS_TYPE}${WITNESS_TYPE}`;

const EIP712_DOMAIN_TYPEHASH = keccakUtf8(EIP712_DOMAIN_TYPE);
const PERMIT2_DOMAIN_TYPEHASH = keccakUtf8(PERMIT2_DOMAIN_TYPE);
const TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccakUtf8(TRANSFER_WITH_AUTHORIZATION_TYPE);
const TOKEN_PERMISSIONS_TYPEHASH = keccakUtf8(TOKEN_PERMISSIONS_TYPE);
const WITNESS_TYPEHASH = keccakUtf8(WITNESS_TYPE);
const PERMIT_WITNESS_TRANSFER_FROM_TYPEHASH = keccakUtf8(PERMIT_WITNESS_TRANSFER_FROM_TYPE);
const PERMIT2_NAME_HASH = keccakUtf8('Permit2');

/** The type hashes, as bytes (copies), for tests and diagnostics. */
export function typeHashes(): Record<'eip712Domain' | 'permit2Domain' | 'transferWithAuthorization' | 'tokenPermissions' | 'witness' | 'permitWitnessTransferFrom', Uint8Array> {
  return {
    eip712Domain: EIP712_DOMAIN_TYPEHASH.slice(),
    permit2Domain: PERMIT2_DOMAIN_TYPEHASH.slice(),
    transferWithAuthorization: TRANSFER_WITH_AUTHORIZATION_TYPEHASH.slice(),
    tokenPermissions: TOKEN_PERMISSIONS_TYPEHASH.slice(),
    witness: WITNESS_TYPEHASH.slice(),
    permitWitnessTransferFrom: PERMIT_WITNESS_TRANSFER_FROM_TYPEHASH.slice(),
  };
}

// ---- scratch buffers (every function below is synchronous, so sharing them is safe) --------------------------

const ENC = new Uint8Array(32 * 7);
const SUB = new Uint8Array(32 * 3);
const FINAL = new Uint8Array(66);
FINAL[0] = 0x19;
FINAL[1] = 0x01;
/** A message's words, for the `try*Digest` functions. */
const WORDS = new Uint8Array(32 * 7);
const WORDS_VIEW = new DataView(WORDS.buffer);

// ---- domain separators, cached --------------------------------------------------------------------------------

/** Upper bound on cached domain separators; the oldest entry is evicted beyond it (domains may come from clients). */
const DOMAIN_CACHE_LIMIT = 4096;
const domainCache = new Map<string, Uint8Array>();

function cachePut(key: string, value: Uint8Array): void {
  if (domainCache.size >= DOMAIN_CACHE_LIMIT) {
    const oldest = domainCache.keys().next();
    if (!oldest.done) domainCache.delete(oldest.value);
  }
  domainCache.set(key, value);
}

/** Number of cached domain separators (for tests and metrics). */
export function domainCacheSize(): number {
  return domainCache.size;
}

/**
 * The EIP-712 domain separator of an EIP-3009 token, from the cache keyed by `chainId:verifyingContract:name:version`
 * (the contract lower-cased, the name length-prefixed so that `:` inside a name cannot alias another domain).
 */
export function tryDomainSeparator(domain: Eip3009Domain): Uint8Array | undefined {
  if (domain === null || typeof domain !== 'object') return undefined;
  const { name, version, verifyingContract } = domain;
  if (typeof name !== 'string' || typeof version !== 'string' || typeof verifyingContract !== 'string') return undefined;
  const chainId = toUint256(domain.chainId);
  if (chainId === undefined) return undefined;
  const key = `${chainId}:${verifyingContract.toLowerCase()}:${name.length}:${name}:${version}`;
  const hit = domainCache.get(key);
  if (hit !== undefined) return hit;
  const buf = new Uint8Array(32 * 5);
  buf.set(EIP712_DOMAIN_TYPEHASH, 0);
  buf.set(keccakUtf8(name), 32);
  buf.set(keccakUtf8(version), 64);
  writeUint256(chainId, new DataView(buf.buffer), 96);
  if (!writeAddressWord(verifyingContract, buf, 128)) return undefined;
  const separator = keccakBytes(buf);
  cachePut(key, separator);
  return separator;
}

/** The domain separator of Permit2 (`name: "Permit2"`, no version) on a chain, cached. */
export function tryPermit2DomainSeparator(domain: Permit2Domain): Uint8Array | undefined {
  if (domain === null || typeof domain !== 'object') return undefined;
  const { verifyingContract } = domain;
  if (typeof verifyingContract !== 'string') return undefined;
  const chainId = toUint256(domain.chainId);
  if (chainId === undefined) return undefined;
  const key = `permit2:${chainId}:${verifyingContract.toLowerCase()}`;
  const hit = domainCache.get(key);
  if (hit !== undefined) return hit;
  const buf = new Uint8Array(32 * 4);
  buf.set(PERMIT2_DOMAIN_TYPEHASH, 0);
  buf.set(PERMIT2_NAME_HASH, 32);
  writeUint256(chainId, new DataView(buf.buffer), 64);
  if (!writeAddressWord(verifyingContract, buf, 96)) return undefined;
  const separator = keccakBytes(buf);
  cachePut(key, separator);
  return separator;
}

export function domainSeparator(domain: Eip3009Domain): Uint8Array {
  return orThrow(tryDomainSeparator(domain), 'EIP-712 domain');
}

export function permit2DomainSeparator(domain: Permit2Domain): Uint8Array {
  return orThrow(tryPermit2DomainSeparator(domain), 'Permit2 domain');
}

// ---- message words and digests ---------------------------------------------------------------------------------
//
// A message is first written as its ABI words (the flat fields, in the order of its type), which is all the parsing
// there is; the digest is then computed from those words and the domain separator. The worker pool ships the words.

/** Bytes of an EIP-3009 message's words: from, to, value, validAfter, validBefore, nonce. */
export const EIP3009_MESSAGE_BYTES = 32 * 6;
/** Bytes of a Permit2 witness message's words: token, amount, spender, nonce, deadline, witnessTo, witnessValidAfter. */
export const PERMIT2_MESSAGE_BYTES = 32 * 7;

/** Writes the words of a `TransferWithAuthorization` at `out[offset..offset + EIP3009_MESSAGE_BYTES)`; false when malformed. */
export function writeEip3009Message(a: Eip3009Authorization, out: Uint8Array, view: DataView, offset: number): boolean {
  if (a === null || typeof a !== 'object') return false;
  return (
    writeAddressWord(a.from, out, offset) &&
    writeAddressWord(a.to, out, offset + 32) &&
    writeUint256(a.value, view, offset + 64) &&
    writeUint256(a.validAfter, view, offset + 96) &&
    writeUint256(a.validBefore, view, offset + 128) &&
    writeBytes32(a.nonce, out, offset + 160)
  );
}

/** Writes the words of a Permit2 witness transfer at `out[offset..offset + PERMIT2_MESSAGE_BYTES)`; false when malformed. */
export function writePermit2Message(p: Permit2WitnessMessage, out: Uint8Array, view: DataView, offset: number): boolean {
  if (p === null || typeof p !== 'object') return false;
  return (
    writeAddressWord(p.token, out, offset) &&
    writeUint256(p.amount, view, offset + 32) &&
    writeAddressWord(p.spender, out, offset + 64) &&
    writeUint256(p.nonce, view, offset + 96) &&
    writeUint256(p.deadline, view, offset + 128) &&
    writeAddressWord(p.witnessTo, out, offset + 160) &&
    writeUint256(p.witnessValidAfter, view, offset + 192)
  );
}

/** keccak(0x1901 ‖ separator ‖ structHash) into `out[outOffset..]`, with the struct hash already written at FINAL[34..66). */
function finalDigest(separator: Uint8Array, separatorOffset: number, out: Uint8Array, outOffset: number): Uint8Array {
  FINAL.set(separator.subarray(separatorOffset, separatorOffset + 32), 2);
  return keccak256Bytes(FINAL, out, outOffset);
}

/**
 * The EIP-3009 digest from the domain separator (32 bytes at `separator[separatorOffset..]`) and the message words
 * (at `words[offset..]`), written to `out[outOffset..]` (a fresh array when omitted).
 */
export function eip3009DigestOfWords(separator: Uint8Array, separatorOffset: number, words: Uint8Array, offset: number, out: Uint8Array = new Uint8Array(32), outOffset = 0): Uint8Array {
  ENC.set(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, 0);
  ENC.set(words.subarray(offset, offset + EIP3009_MESSAGE_BYTES), 32);
  keccak256Bytes(ENC.subarray(0, 32 + EIP3009_MESSAGE_BYTES), FINAL, 34);
  return finalDigest(separator, separatorOffset, out, outOffset);
}

/** The Permit2 witness digest from the domain separator and the message words, as `eip3009DigestOfWords`. */
export function permit2DigestOfWords(separator: Uint8Array, separatorOffset: number, words: Uint8Array, offset: number, out: Uint8Array = new Uint8Array(32), outOffset = 0): Uint8Array {
  // The two nested structs are encoded in SUB and hashed straight into their slots of the outer encoding in ENC.
  // TokenPermissions(token, amount) -> ENC[32..64)
  SUB.set(TOKEN_PERMISSIONS_TYPEHASH, 0);
  SUB.set(words.subarray(offset, offset + 64), 32);
  keccak256Bytes(SUB, ENC, 32);
  // Witness(to, validAfter) -> ENC[160..192)
  SUB.set(WITNESS_TYPEHASH, 0);
  SUB.set(words.subarray(offset + 160, offset + 224), 32);
  keccak256Bytes(SUB, ENC, 160);
  // PermitWitnessTransferFrom(permitted, spender, nonce, deadline, witness) -> FINAL[34..66)
  ENC.set(PERMIT_WITNESS_TRANSFER_FROM_TYPEHASH, 0);
  ENC.set(words.subarray(offset + 64, offset + 160), 64);
  keccak256Bytes(ENC.subarray(0, 192), FINAL, 34);
  return finalDigest(separator, separatorOffset, out, outOffset);
}

/** Digest of `TransferWithAuthorization` (EIP-3009) under the token's domain; undefined on malformed input. */
export function tryEip3009Digest(domain: Eip3009Domain, a: Eip3009Authorization): Uint8Array | undefined {
  const separator = tryDomainSeparator(domain);
  if (separator === undefined || !writeEip3009Message(a, WORDS, WORDS_VIEW, 0)) return undefined;
  return eip3009DigestOfWords(separator, 0, WORDS, 0);
}

/** Digest of Permit2's `PermitWitnessTransferFrom` with x402's `Witness(address to,uint256 validAfter)`; undefined on malformed input. */
export function tryPermit2WitnessDigest(domain: Permit2Domain, p: Permit2WitnessMessage): Uint8Array | undefined {
  const separator = tryPermit2DomainSeparator(domain);
  if (separator === undefined || !writePermit2Message(p, WORDS, WORDS_VIEW, 0)) return undefined;
  return permit2DigestOfWords(separator, 0, WORDS, 0);
}

/** EIP-712 digest of an EIP-3009 `TransferWithAuthorization`. Throws a TypeError on malformed input. */
export function eip3009Digest(domain: Eip3009Domain, a: Eip3009Authorization): Uint8Array {
  return orThrow(tryEip3009Digest(domain, a), 'EIP-3009 domain or authorization');
}

/** EIP-712 digest of an x402 Permit2 witness transfer. Throws a TypeError on malformed input. */
export function permit2WitnessDigest(domain: Permit2Domain, p: Permit2WitnessMessage): Uint8Array {
  return orThrow(tryPermit2WitnessDigest(domain, p), 'Permit2 domain or permit');
}

function orThrow(v: Uint8Array | undefined, what: string): Uint8Array {
  if (v === undefined) throw new TypeError(`malformed ${what}`);
  return v;
}
