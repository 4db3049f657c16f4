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
 *
 * This module uses no Node built-in: the web front end signs with it in the browser. How the file's SHA-256 is
 * taken is the caller's (`FileSha256`); `signature.ts` is the gateway's side.
 */
import { keccak256, stringToBytes, type Hex } from 'viem';
import { canonicalJson } from '../../protocol/mpp/canonical-json.ts';
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

/** The lower-case hex SHA-256 of the bytes `contentBase64` encodes, or `undefined` when it is not canonical padded standard base64. */
export type FileSha256 = (contentBase64: string) => string | undefined;

/**
 * The object whose canonical JSON is hashed into `digest`: the registration with a file upstream's
 * `contentBase64` replaced by `contentSha256`. Throws a TypeError when `contentBase64` is not canonical padded
 * standard base64.
 */
export function registrationDigestPreimage(registration: Registration | DeleteRegistration, fileSha256: FileSha256): unknown {
  const upstream: unknown = registration.upstream;
  if (upstream === null || typeof upstream !== 'object' || Array.isArray(upstream)) return registration;
  const u = upstream as Record<string, unknown>;
  if (u.kind !== 'file' || typeof u.contentBase64 !== 'string') return registration;
  const contentSha256 = fileSha256(u.contentBase64);
  if (contentSha256 === undefined) throw new TypeError('upstream.contentBase64 is not canonical standard base64');
  const { contentBase64: _content, ...rest } = u;
  return { ...registration, upstream: { ...rest, contentSha256 } };
}

/** keccak256 of the canonical JSON (UTF-8) of {@link registrationDigestPreimage}. Throws a TypeError when it is not plain JSON data. */
export function registrationDigest(registration: Registration | DeleteRegistration, fileSha256: FileSha256): Hex {
  const text = canonicalJson(registrationDigestPreimage(registration, fileSha256));
  if (!text.ok) throw new TypeError(`registration is not plain JSON data: ${text.error.message}`);
  return keccak256(stringToBytes(text.value));
}

/**
 * The typed data to sign and to verify. Throws a TypeError when the registration is not plain JSON data or
 * `issuedAt` is not a non-negative safe integer.
 */
export function registrationTypedData(registration: Registration | DeleteRegistration, fileSha256: FileSha256): RegistrationTypedData {
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
      digest: registrationDigest(registration, fileSha256),
      nonce: registration.nonce,
      issuedAt: BigInt(registration.issuedAt),
    },
  };
}
