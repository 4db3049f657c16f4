/**
 * What binds an MPP challenge to the one call it was issued for, beyond its price: the route, the HTTP method,
 * the request body, and a salt that makes every challenge (and so every EIP-3009 nonce, keccak256(id + realm))
 * distinct. All of it travels in auth-params that the challenge id's HMAC covers, so a client cannot alter it.
 *
 * - `opaque` = base64url_nopad(route tag (18 bytes) || salt (12 bytes)): 24 characters naming the route and
 *   method, then 16 random ones. The route tag is the first 18 bytes of SHA-256(`merchant\nroute\nmethod`);
 *   18 is a multiple of 3, so the two base64url parts concatenate into the base64url of the 30 bytes, and the
 *   tag can be compared as a prefix. A paid retry must carry the tag of the route and method it is sent to.
 * - `digest` = `sha-256=<standard base64 with padding>` of the request body, as mppx 0.11's `BodyDigest`
 *   computes it (of the body's UTF-8 bytes). It is sent only for a request with a non-empty body, and a paid
 *   retry's body must have that digest; a retry with a body under a challenge without a digest is refused too.
 */
import { Buffer } from 'node:buffer';
import { createHash, randomBytes } from 'node:crypto';

/** Length in characters of the route tag at the start of `opaque`. */
export const ROUTE_TAG_CHARS = 24;
/** Length in characters of the salt after it. */
export const SALT_CHARS = 16;
const SALT_BYTES = 12;

/** The method a challenge is bound to: `HEAD` is answered as `GET`, so they share one. */
export function boundMethod(method: string): string {
  return method === 'HEAD' ? 'GET' : method;
}

/** base64url of the first 18 bytes of SHA-256(`merchant\nroute\nmethod`): 24 characters. */
export function routeTag(merchant: string, route: string, method: string): string {
  return createHash('sha256')
    .update(`${merchant}\n${route}\n${boundMethod(method)}`, 'utf8')
    .digest()
    .subarray(0, 18)
    .toString('base64url');
}

/** The `opaque` auth-param of a challenge for the route with this tag. */
export function opaqueFor(tag: string, salt: string): string {
  return tag + salt;
}

/** True when `opaque` was made by {@link opaqueFor} for the route with this tag. */
export function opaqueIsFor(opaque: string | undefined, tag: string): boolean {
  return typeof opaque === 'string' && opaque.length === ROUTE_TAG_CHARS + SALT_CHARS && opaque.startsWith(tag);
}

/** `sha-256=<base64>` of a request body, as mppx's `BodyDigest.compute` writes it; undefined for an empty body. */
export function bodyDigest(body: Uint8Array): string | undefined {
  if (body.length === 0) return undefined;
  return `sha-256=${createHash('sha256').update(body).digest('base64')}`;
}

/**
 * Why a paid retry's body does not match the challenge it answers, or undefined when it does: the challenge's
 * `digest` must be exactly the digest of the body sent (and absent when no body is sent).
 */
export function bodyMismatch(challengeDigest: string | undefined, sentDigest: string | undefined): string | undefined {
  if (challengeDigest === sentDigest) return undefined;
  if (sentDigest === undefined) return 'the challenge was issued for a request with a body, and none was sent';
  if (challengeDigest === undefined) return 'the challenge was issued for a request without a body; ask for a new one with this body';
  return 'the request body is not the one the challenge was issued for';
}

/** Salts for `opaque`: 16 base64url characters of fresh randomness each, drawn from a pool refilled by `random`. */
export function saltSource(random: (bytes: number) => Buffer = randomBytes, poolSalts = 4096): () => string {
  let pool: Buffer = Buffer.alloc(0);
  let at = 0;
  return () => {
    if (at + SALT_BYTES > pool.length) {
      pool = random(SALT_BYTES * poolSalts);
      at = 0;
    }
    const salt = pool.toString('base64url', at, at + SALT_BYTES);
    at += SALT_BYTES;
    return salt;
  };
}
