/**
 * The EIP-712 message a merchant's `payTo` wallet signs to register, update or delete its listing.
 *
 * Registration is off-chain, so the domain has no `chainId` (nor a verifying contract): a signature is valid on
 * every gateway running gate402, but only once per slug (nonce) and only for ±10 minutes (`issuedAt`).
 * The typed message names the fields a wallet should show (action, slug, payTo, nonce, issuedAt) and covers the
 * whole registration through `digest`:
 *
 *     digest = keccak256(utf8(canonicalJson(preimage)))      (RFC 8785 canonical JSON)
 *
 * where `preimage` is the registration object exactly as sent, except that a file upstream's `contentBase64`
 * is replaced by `contentSha256`, the lower-case hex SHA-256 of the decoded file bytes (which is also the
 * file's content address). Every field is covered either way; hashing a 10 MiB upload with JavaScript keccak
 * would cost about two seconds of the gateway's event loop per request, SHA-256 (native) costs milliseconds.
 */
import { createHash } from 'node:crypto';
import { keccak256, recoverTypedDataAddress, stringToBytes, type Hex } from 'viem';
import { canonicalJson } from '../../protocol/mpp/canonical-json.ts';
import { decodeCanonicalBase64 } from './base64.ts';
import type { DeleteRegistration, Registration } from './types.ts';

export const REGISTRATION_DOMAIN = { name: 'gate402 merchants', version: '1' } as const;

export const REGISTRATION_TYPES = {
  MerchantRegistration: [
    { name: 'action', type: 'string' },
    { name: 'slug', type: 'string' },
    { name: 'payTo', type: 'address' },
    { name: 'digest', type: 'bytes32' },
    { name: 'nonce', type: 'string' },
    { name: 'issuedAt', type: 'uint256' },
  ],
} as const;

export const REGISTRATION_PRIMARY_TYPE = 'MerchantRegistration';

export interface RegistrationTypedData {
  domain: typeof REGISTRATION_DOMAIN;
  types: typeof REGISTRATION_TYPES;
  primaryType: typeof REGISTRATION_PRIMARY_TYPE;
  message: { action: string; slug: string; payTo: `0x${string}`; digest: Hex; nonce: string; issuedAt: bigint };
}

/**
 * The object whose canonical JSON is hashed into `digest`: the registration with a file upstream's
 * `contentBase64` replaced by `contentSha256` (hex SHA-256 of the decoded bytes). Throws a TypeError when
 * `contentBase64` is not canonical padded standard base64.
 */
export function registrationDigestPreimage(registration: Registration | DeleteRegistration): unknown {
  const upstream: unknown = registration.upstream;
  if (upstream === null || typeof upstream !== 'object' || Array.isArray(upstream)) return registration;
  const u = upstream as Record<string, unknown>;
  if (u.kind !== 'file' || typeof u.contentBase64 !== 'string') return registration;
  const bytes = decodeCanonicalBase64(u.contentBase64);
  if (!bytes) throw new TypeError('upstream.contentBase64 is not canonical standard base64');
  const { contentBase64: _content, ...rest } = u;
  return { ...registration, upstream: { ...rest, contentSha256: createHash('sha256').update(bytes).digest('hex') } };
}

/** keccak256 of the canonical JSON (UTF-8) of {@link registrationDigestPreimage}. Throws a TypeError when it is not plain JSON data. */
export function registrationDigest(registration: Registration | DeleteRegistration): Hex {
  const text = canonicalJson(registrationDigestPreimage(registration));
  if (!text.ok) throw new TypeError(`registration is not plain JSON data: ${text.error.message}`);
  return keccak256(stringToBytes(text.value));
}

/**
 * The typed data to sign (`account.signTypedData(registrationTypedData(r))`, `walletClient.signTypedData(...)`)
 * and to verify. Throws a TypeError when the registration is not plain JSON data or `issuedAt` is not a
 * non-negative safe integer.
 */
export function registrationTypedData(registration: Registration | DeleteRegistration): RegistrationTypedData {
  if (!Number.isSafeInteger(registration.issuedAt) || registration.issuedAt < 0) throw new TypeError('issuedAt must be a non-negative integer (unix seconds)');
  return {
    domain: REGISTRATION_DOMAIN,
    types: REGISTRATION_TYPES,
    primaryType: REGISTRATION_PRIMARY_TYPE,
    message: {
      action: registration.action,
      slug: registration.slug,
      // An address is encoded as 20 bytes whatever its case; lower case keeps viem's checksum check out of the way
      // for all-caps addresses (the validator decides which spellings are acceptable, the digest covers the text).
      payTo: registration.payTo.toLowerCase() as `0x${string}`,
      digest: registrationDigest(registration),
      nonce: registration.nonce,
      issuedAt: BigInt(registration.issuedAt),
    },
  };
}

/**
 * The address that signed `registration` (EOA signatures only; a contract wallet's ERC-1271 signature is not
 * supported), or `undefined` when the signature is malformed or the data cannot be hashed. Never throws.
 */
export async function recoverRegistrationSigner(registration: Registration | DeleteRegistration, signature: Hex): Promise<`0x${string}` | undefined> {
  try {
    return await recoverTypedDataAddress({ ...registrationTypedData(registration), signature });
  } catch {
    return undefined;
  }
}
