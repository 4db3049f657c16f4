/**
 * Confinement of a paid request's path to its route. A buyer pays for `/m/{slug}/{route}[/segments]`, and the
 * gateway calls `{merchant base}/{route}[/segments]` with the merchant's secret headers: the appended segments must
 * never make that call land anywhere else on the merchant's upstream (`..` in any encoding, encoded slashes,
 * backslashes, NUL and control characters all could, depending on the URL parser or the upstream's server).
 *
 * So the path is not forwarded as it came: each segment is decoded strictly (a malformed escape or invalid UTF-8 is
 * refused), checked, and encoded again canonically (everything but RFC 3986 unreserved characters percent-encoded),
 * and the URL built from them is parsed once more and checked to be inside the route. Pure functions.
 */

import { ok, refusal, type Err, type HttpFailure, type Ok } from '../../protocol/result.ts';

/** A path or query that cannot be forwarded: refused 400, before anything is charged. */
export type PathRefusal = Err<HttpFailure<'invalid_path'>>;
const refuse = (message: string): PathRefusal => refusal('invalid_path', message, 400);

/** The route named by the first segment, and the appended segments, each canonically encoded. */
export type ConfinedPath = Ok<{ route: string; segments: string[] }> | PathRefusal;

/** C0 controls, DEL and the C1 controls: never part of a resource name, and read as separators by some servers. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the pattern exists to find control characters and refuse them
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** A segment decoded, or `undefined` for a malformed escape or invalid UTF-8. */
function decodeStrict(raw: string): string | undefined {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/** Percent-encodes all but RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`), as UTF-8. */
export function encodeSegment(decoded: string): string {
  return encodeURIComponent(decoded).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** Why a decoded segment could leave the route or be read as more than one segment; `undefined` when it is fine. */
function unsafeSegment(decoded: string): string | undefined {
  if (decoded === '.' || decoded === '..') return 'a dot segment';
  if (decoded.includes('/')) return 'an encoded slash';
  if (decoded.includes('\\')) return 'a backslash';
  if (CONTROL.test(decoded)) return 'a control character';
  if (decoded.includes('\ufffd')) return 'an invalid character';
  return undefined;
}

/**
 * `rest` is the raw (still percent-encoded) path after `/m/{slug}/`: `{route}[/segment...]`. Refused when any
 * segment is malformed or could leave the route; otherwise the decoded route name and the encoded segments.
 */
export function confinePath(rest: string): ConfinedPath {
  const raw = rest.split('/');
  const out: string[] = [];
  for (let i = 0; i < raw.length; i++) {
    const segment = raw[i]!;
    if (segment.includes('\\')) return refuse('the path contains a backslash');
    const decoded = decodeStrict(segment);
    if (decoded === undefined) return refuse('the path has a malformed percent-escape or invalid UTF-8');
    const unsafe = unsafeSegment(decoded);
    if (unsafe !== undefined) return refuse(`the path contains ${unsafe}`);
    if (i === 0) {
      out.push(decoded); // the route name, matched against the merchant's routes as it is
      continue;
    }
    try {
      out.push(encodeSegment(decoded));
    } catch {
      return refuse('the path has an invalid character'); // a lone surrogate
    }
  }
  const [route, ...segments] = out;
  return ok({ route: route ?? '', segments });
}

/** A query string refused when it has a malformed escape, invalid UTF-8, a control character or a raw `#`. */
export function checkQuery(query: string): PathRefusal | undefined {
  if (query === '') return undefined;
  if (CONTROL.test(query)) return refuse('the query contains a control character');
  if (query.includes('#')) return refuse('the query contains a raw #');
  if (query.includes('%') && decodeStrict(query) === undefined) return refuse('the query has a malformed percent-escape or invalid UTF-8');
  return undefined;
}

/** The route and its segments as the path sent upstream (relative to the merchant's base): `latest/a%20b`. */
export function upstreamRelativePath(route: string, segments: string[]): string {
  const first = encodeSegment(route);
  return segments.length === 0 ? first : `${first}/${segments.join('/')}`;
}

export type ConfinedUrl = Ok<string> | PathRefusal;

/**
 * `{base}/{route}[/segments][?query]`, checked once parsed: same origin as the base, and a path that the URL parser
 * left exactly as built, under `{base path}/{route}`. `relative` comes from {@link upstreamRelativePath}; the first
 * segment of it is the route.
 */
export function confinedUpstreamUrl(baseUrl: string, relative: string, query: string): ConfinedUrl {
  let base: URL;
  try {
    base = new URL(baseUrl);
  } catch {
    return refuse('the merchant upstream is misconfigured');
  }
  const basePath = base.pathname.endsWith('/') ? base.pathname.slice(0, -1) : base.pathname;
  const cut = relative.indexOf('/');
  const routePrefix = `${basePath}/${cut < 0 ? relative : relative.slice(0, cut)}`;
  const path = `${basePath}/${relative}`;
  let url: URL;
  try {
    url = new URL(`${base.origin}${path}${query ? `?${query}` : ''}`);
  } catch {
    return refuse('the path cannot be forwarded');
  }
  const inside = url.pathname === routePrefix || url.pathname.startsWith(`${routePrefix}/`);
  if (url.origin !== base.origin || url.pathname !== path || !inside || url.hash !== '') return refuse('the path leaves the route');
  return ok(url.href);
}
