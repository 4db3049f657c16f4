/**
 * The gateway's side of the signed merchant registration (the message itself is `registration-typed-data.ts`):
 * a file upstream is hashed with Node's native SHA-256, and signatures are recovered here.
 */
import { createHash } from 'node:crypto';
import { recoverTypedDataAddress, type Hex } from 'viem';
import { decodeCanonicalBase64 } from './base64.ts';
import * as typed from './registration-typed-data.ts';
import type { DeleteRegistration, Registration } from './types.ts';

export { REGISTRATION_DOMAIN, REGISTRATION_PRIMARY_TYPE, REGISTRATION_TYPES, type RegistrationTypedData } from './registration-typed-data.ts';

function fileSha256(contentBase64: string): string | undefined {
  const bytes = decodeCanonicalBase64(contentBase64);
  return bytes && createHash('sha256').update(bytes).digest('hex');
}

/** See {@link typed.registrationDigestPreimage}. Throws a TypeError when `contentBase64` is not canonical padded standard base64. */
export function registrationDigestPreimage(registration: Registration | DeleteRegistration): unknown {
  return typed.registrationDigestPreimage(registration, fileSha256);
}

/** keccak256 of the canonical JSON (UTF-8) of {@link registrationDigestPreimage}. Throws a TypeError when it is not plain JSON data. */
export function registrationDigest(registration: Registration | DeleteRegistration): Hex {
  return typed.registrationDigest(registration, fileSha256);
}

/**
 * The typed data to sign (`account.signTypedData(registrationTypedData(r))`, `walletClient.signTypedData(...)`)
 * and to verify. Throws a TypeError when the registration is not plain JSON data or `issuedAt` is not a
 * non-negative safe integer.
 */
export function registrationTypedData(registration: Registration | DeleteRegistration): typed.RegistrationTypedData {
  return typed.registrationTypedData(registration, fileSha256);
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
