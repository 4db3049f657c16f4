/**
 * Pure validation of `POST /api/merchants` bodies: the compiled JSON Schemas for the shape
 * (`registration-schemas.ts`), then code for what a schema cannot say (reserved slugs, address checksums, configured
 * networks, price bounds, clock window, URL and header rules, upload size and type). Every refusal is one clear message, answered 400 by the registry.
 *
 * Nothing here touches the network or the store: the upstream's DNS check is `../upstream-guard/guard.ts`,
 * signature, ownership and nonce checks are the registry's.
 */
import { parseDecimalAmount, USD_DECIMALS } from '../../protocol/amounts.ts';
import { checkAddress } from '../../protocol/address.ts';
import { ok, refusal, type Err, type HttpFailure, type Ok } from '../../protocol/result.ts';
import { describeFloor, floorUsd, type Floor } from '../../policy/price-floor.ts';
import type { MerchantRoute } from '../catalog/merchant.ts';
import { UpstreamAllowlist, urlPort } from '../upstream-guard/guard.ts';
import { decodeCanonicalBase64 } from './base64.ts';
import { DEFAULT_REGISTRATION_LIMITS, MAX_FILE_NAME, MAX_HEADER_NAME, PRICE, resolveLimits, type RegistrationLimits } from './registration-limits.ts';
import { describeSchemaError, PATTERN_HINTS, SLUG, validators } from './registration-schemas.ts';
import { FORBIDDEN_CONTENT_TYPES, FORBIDDEN_SECRET_HEADERS, RESERVED_SLUGS } from './reserved-names.ts';
import type { Registration, RegistrationRequest, RouteInput, ValidatedRegistration, ValidatedUpstream } from './types.ts';

/** A registration check's result: every refusal is answered 400 with its message. */
export type Checked<T> = Ok<T> | Err<HttpFailure<'invalid_registration' | 'invalid_address'>>;

const good = ok;
const bad = (message: string): Err<HttpFailure<'invalid_registration'>> => refusal('invalid_registration', message, 400);

/** A request body limit (bytes) that fits the largest upload as base64 plus the rest of a registration. */
export function registrationBodyLimit(maxFileBytes: number = DEFAULT_REGISTRATION_LIMITS.maxFileBytes): number {
  return base64Length(maxFileBytes) + 1024 * 1024;
}

function base64Length(bytes: number): number {
  return 4 * Math.ceil(bytes / 3);
}

/** The syntax of the fields checked in code. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;
const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._ ()+-]*$/;
const MEDIA_TYPE = /^([a-z0-9][a-z0-9!#$&^_.+-]{0,63})\/([a-z0-9][a-z0-9!#$&^_.+-]{0,126})(?:\s*;\s*charset=("?)([a-z0-9][a-z0-9._:-]{0,39})\3)?$/;
const URL_TEXT = /^[\x21-\x7e]+$/;

// ---------------------------------------------------------------------------------------------
// Semantic checks

export interface ValidationContext {
  /** The networks this gateway settles on (a `NetworkRegistry` will do). */
  networks: { has(caip2: string): boolean };
  /** The gateway's clock, unix milliseconds. */
  nowMs: number;
  limits?: Partial<RegistrationLimits> | RegistrationLimits;
  /** Hosts/addresses an `http:` (not https) upstream may use; see `../upstream-guard/guard.ts`. */
  upstreamAllowlist?: UpstreamAllowlist | readonly string[];
}

/** A payTo: mixed case must carry a correct EIP-55 checksum; all-lower or all-upper hex is taken as unchecksummed. */
export function checkPayTo(text: string): Checked<`0x${string}`> {
  return checkAddress(text, 'payTo');
}

/** `0.000001` ≤ price ≤ `1000.000000` (configurable), exactly 6 fraction digits. */
export function checkPrice(price: string, limits: RegistrationLimits): Checked<bigint> {
  const atomic = PRICE.test(price) ? parseDecimalAmount(price, USD_DECIMALS) : undefined;
  if (atomic === undefined) return bad(`priceUsd ${JSON.stringify(price)} ${PATTERN_HINTS.priceUsd}`);
  const min = parseDecimalAmount(limits.minPriceUsd, USD_DECIMALS)!;
  const max = parseDecimalAmount(limits.maxPriceUsd, USD_DECIMALS)!;
  if (atomic < min || atomic > max) return bad(`priceUsd ${price} must be between ${limits.minPriceUsd} and ${limits.maxPriceUsd}`);
  return good(atomic);
}

export function checkSlug(slug: string): Checked<string> {
  if (!SLUG.test(slug)) return bad(`slug ${JSON.stringify(slug)} ${PATTERN_HINTS.slug}`);
  if (RESERVED_SLUGS.has(slug)) return bad(`slug ${slug} is reserved`);
  return good(slug);
}

/** Normalised `href` of an upstream base URL, or why it is refused. No DNS here (see the upstream guard). */
export function checkBaseUrl(raw: string, allowlist: UpstreamAllowlist): Checked<string> {
  if (!URL_TEXT.test(raw)) return bad('upstream.baseUrl must not contain spaces or control characters');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return bad('upstream.baseUrl is not a valid absolute URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return bad('upstream.baseUrl must be an https: URL');
  if (url.username !== '' || url.password !== '' || /^[a-z]+:\/\/[^/?#]*@/i.test(raw)) return bad('upstream.baseUrl must not contain credentials (use secretHeaders)');
  if (raw.includes('#')) return bad('upstream.baseUrl must not contain a fragment');
  if (url.hostname === '') return bad('upstream.baseUrl has no host');
  if (url.protocol === 'http:' && !allowlist.allowsHost(url.hostname, urlPort(url))) return bad('upstream.baseUrl must be an https: URL (http: is only allowed for hosts the operator allowlisted)');
  return good(url.href);
}

/** Lower-cased header names; refuses hop-by-hop and framing headers and values that are not printable ASCII. */
export function checkSecretHeaders(headers: Record<string, string> | undefined): Checked<Record<string, string>> {
  const out = new Map<string, string>();
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (name.length > MAX_HEADER_NAME || !TOKEN.test(name) || name === '__proto__') return bad(`secret header name ${JSON.stringify(name.slice(0, MAX_HEADER_NAME))} is not a valid HTTP header name`);
    const lower = name.toLowerCase();
    if (FORBIDDEN_SECRET_HEADERS.has(lower) || lower.startsWith('proxy-') || lower.startsWith('sec-')) return bad(`secret header ${lower} may not be set (hop-by-hop, framing or routing header)`);
    if (out.has(lower)) return bad(`secret header ${lower} is given twice`);
    // Never echo the value: it is a secret.
    if (!HEADER_VALUE.test(value)) return bad(`secret header ${lower} must have a non-empty value of printable ASCII without leading or trailing spaces`);
    out.set(lower, value);
  }
  return good(Object.fromEntries(out));
}

/** `type/subtype` (+ `; charset=x`), lower-cased; refuses active content the gateway would serve from its origin. */
export function checkContentType(raw: string): Checked<string> {
  const m = MEDIA_TYPE.exec(raw.trim().toLowerCase());
  if (!m) return bad('upstream.contentType must be a media type like "application/json" or "text/plain; charset=utf-8"');
  const essence = `${m[1]}/${m[2]}`;
  if (FORBIDDEN_CONTENT_TYPES.has(essence) || /(^|[/+])(html|xml|javascript|ecmascript)$/.test(essence)) return bad(`upstream.contentType ${essence} is not allowed (active content)`);
  return good(m[4] !== undefined ? `${essence}; charset=${m[4]}` : essence);
}

export function checkFileName(name: string): Checked<string> {
  if (!FILE_NAME.test(name) || name.length > MAX_FILE_NAME) return bad('upstream.fileName must be 1 to 200 letters, digits, spaces or ._()+- characters, starting with a letter or digit');
  return good(name);
}

function checkFileContent(base64: string, maxBytes: number): Checked<Uint8Array> {
  if (base64.length > base64Length(maxBytes) + 2) return bad(`upstream file is larger than ${maxBytes} bytes`);
  const bytes = decodeCanonicalBase64(base64);
  if (!bytes) return bad('upstream.contentBase64 is not canonical standard base64 (A-Z a-z 0-9 + /, padded with =, no whitespace)');
  if (bytes.byteLength === 0) return bad('upstream file is empty');
  if (bytes.byteLength > maxBytes) return bad(`upstream file is larger than ${maxBytes} bytes`);
  return good(bytes);
}

function checkUpstream(raw: unknown, limits: RegistrationLimits, allowlist: UpstreamAllowlist): Checked<ValidatedUpstream> {
  const kind = (raw as { kind: string }).kind;
  if (kind === 'url') {
    if (!validators.urlUpstream(raw)) return bad(describeSchemaError(validators.urlUpstream.errors, '/registration/upstream'));
    const baseUrl = checkBaseUrl(raw.baseUrl, allowlist);
    if (!baseUrl.ok) return baseUrl;
    const headers = checkSecretHeaders(raw.secretHeaders);
    if (!headers.ok) return headers;
    return good({ kind: 'url', baseUrl: baseUrl.value, secretHeaders: headers.value });
  }
  if (!validators.fileUpstream(raw)) return bad(describeSchemaError(validators.fileUpstream.errors, '/registration/upstream'));
  const fileName = checkFileName(raw.fileName);
  if (!fileName.ok) return fileName;
  const contentType = checkContentType(raw.contentType);
  if (!contentType.ok) return contentType;
  const content = checkFileContent(raw.contentBase64, limits.maxFileBytes);
  if (!content.ok) return content;
  return good({ kind: 'file', fileName: fileName.value, contentType: contentType.value, content: content.value });
}

function checkRoutes(slug: string, routes: RouteInput[], limits: RegistrationLimits): Checked<MerchantRoute[]> {
  if (routes.length > limits.maxRoutes) return bad(`at most ${limits.maxRoutes} routes are allowed, got ${routes.length}`);
  const seen = new Set<string>();
  const out: MerchantRoute[] = [];
  for (const r of routes) {
    if (seen.has(r.route)) return bad(`route ${r.route} is listed twice`);
    seen.add(r.route);
    const price = checkPrice(r.priceUsd, limits);
    if (!price.ok) return bad(`route ${r.route}: ${price.error.message}`);
    if (r.summary.trim() === '') return bad(`route ${r.route}: summary must not be blank`);
    out.push({
      route: r.route,
      methods: (['GET', 'POST'] as const).filter((m) => r.methods.includes(m)),
      priceUsd: r.priceUsd,
      summary: r.summary,
      description: r.description,
      input: r.input,
      operationId: `${slug}-${r.route}`,
      ...(r.requirePaymentId === true ? { requirePaymentId: true } : {}),
      ...(r.batchSettlement === true ? { batchSettlement: true } : {}),
    });
  }
  return good(out);
}

export function checkIssuedAt(issuedAt: number, nowMs: number, skewSeconds: number): Checked<number> {
  const deltaS = issuedAt - nowMs / 1000;
  if (deltaS > skewSeconds) return bad(`issuedAt is ${Math.round(deltaS)} s in the future (more than ${skewSeconds} s; is your clock right? issuedAt is unix seconds)`);
  if (-deltaS > skewSeconds) return bad(`issuedAt is ${Math.round(-deltaS)} s old (at most ${skewSeconds} s); sign a fresh registration`);
  return good(issuedAt);
}

export interface ValidRequest {
  /** The registration exactly as received: what the signature covers. */
  request: RegistrationRequest;
  registration: ValidatedRegistration;
}

/**
 * Validates a parsed `POST /api/merchants` body. Checks shape and semantics only: the signature, ownership,
 * nonce reuse and the upstream's DNS are checked by the registry.
 */
export function validateRegistrationRequest(body: unknown, ctx: ValidationContext): Checked<ValidRequest> {
  if (!validators.request(body)) return bad(describeSchemaError(validators.request.errors, ''));
  const raw = body.registration;
  const limits = resolveLimits(ctx.limits);
  const allowlist = ctx.upstreamAllowlist instanceof UpstreamAllowlist ? ctx.upstreamAllowlist : new UpstreamAllowlist(ctx.upstreamAllowlist ?? []);

  if (raw.action === 'delete') {
    if (!validators.delete(raw)) return bad(describeSchemaError(validators.delete.errors, '/registration'));
    const slug = checkSlug(raw.slug);
    if (!slug.ok) return slug;
    const payTo = checkPayTo(raw.payTo);
    if (!payTo.ok) return payTo;
    const issuedAt = checkIssuedAt(raw.issuedAt, ctx.nowMs, limits.clockSkewSeconds);
    if (!issuedAt.ok) return issuedAt;
    return good({
      request: { registration: raw, signature: body.signature },
      registration: { action: 'delete', slug: slug.value, payTo: payTo.value, nonce: raw.nonce, issuedAt: raw.issuedAt },
    });
  }

  if (!validators.upsert(raw)) return bad(describeSchemaError(validators.upsert.errors, '/registration'));
  const r: Registration = raw;
  const slug = checkSlug(r.slug);
  if (!slug.ok) return slug;
  if (r.name.trim() === '') return bad('name must not be blank');
  const payTo = checkPayTo(r.payTo);
  if (!payTo.ok) return payTo;
  for (const n of r.networks) if (!ctx.networks.has(n)) return bad(`network ${n} is not supported by this gateway`);
  const routes = checkRoutes(r.slug, r.routes, limits);
  if (!routes.ok) return routes;
  const issuedAt = checkIssuedAt(r.issuedAt, ctx.nowMs, limits.clockSkewSeconds);
  if (!issuedAt.ok) return issuedAt;
  const upstream = checkUpstream(r.upstream, limits, allowlist);
  if (!upstream.ok) return upstream;
  return good({
    request: { registration: r, signature: body.signature },
    registration: {
      action: r.action as 'register' | 'update',
      slug: slug.value,
      name: r.name,
      description: r.description,
      payTo: payTo.value,
      networks: [...r.networks],
      upstream: upstream.value,
      routes: routes.value,
      nonce: r.nonce,
      issuedAt: r.issuedAt,
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Size of a merchant as a whole

/**
 * How big one merchant may be in total. Each text field has its own cap (the schema's `MAX_*` above); this bounds
 * their sum, so that a merchant of many routes each at every cap (100 x 6 KB) cannot make every discovery document
 * hundreds of kilobytes heavier.
 */
export interface MerchantSizeLimits {
  /** UTF-8 bytes of the name, description and every route's name, summary, description and input together. */
  maxTextBytes: number;
}

export const DEFAULT_MERCHANT_SIZE_LIMITS: Readonly<MerchantSizeLimits> = { maxTextBytes: 64 * 1024 };

/** A merchant's text, in UTF-8 bytes, as {@link MerchantSizeLimits.maxTextBytes} counts it. Pure. */
export function merchantTextBytes(m: { name: string; description: string; routes: ReadonlyArray<{ route: string; summary: string; description: string; input: string }> }): number {
  let total = Buffer.byteLength(m.name) + Buffer.byteLength(m.description);
  for (const r of m.routes) total += Buffer.byteLength(r.route) + Buffer.byteLength(r.summary) + Buffer.byteLength(r.description) + Buffer.byteLength(r.input);
  return total;
}

/** Refuses (400) a registration or update whose text is over the bound. Pure. */
export function checkMerchantSize(
  m: { name: string; description: string; routes: ReadonlyArray<{ route: string; summary: string; description: string; input: string }> },
  limits: MerchantSizeLimits,
): Checked<number> {
  const bytes = merchantTextBytes(m);
  if (bytes > limits.maxTextBytes)
    return bad(`the merchant's text (name, description and every route's name, summary, description and input) is ${bytes} bytes, over the ${limits.maxTextBytes} allowed: shorten it or split it`);
  return good(bytes);
}

// Price floor

/**
 * Every route's price reaches the live price floor of every network the merchant accepts (`floors`, one per network
 * that has one; see `policy/price-floor.ts`): a route below it would have our relayers pay more gas to settle it than
 * it moves, and a merchant who pays itself from a second wallet would burn that gas for free. The refusal names the
 * floor of that network and how it was computed.
 */
export function checkRoutesAboveFloors(routes: readonly Pick<MerchantRoute, 'route' | 'priceUsd'>[], floors: readonly Floor[]): Checked<true> {
  for (const floor of floors) {
    for (const r of routes) {
      const atomic = parseDecimalAmount(r.priceUsd, USD_DECIMALS);
      if (atomic !== undefined && atomic < floor.atoms) {
        return bad(`route ${r.route}: priceUsd ${r.priceUsd} is below ${describeFloor(floor)}; settling it would cost more gas than it pays. Price it at ${floorUsd(floor)} or more`);
      }
    }
  }
  return good(true);
}
