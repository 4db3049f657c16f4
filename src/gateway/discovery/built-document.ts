/**
 * A document built once and served many times: its bytes, a strong ETag, and its gzip and brotli encodings, each
 * made once (on the first request that accepts it) and kept with the document. Every answer is a frozen response,
 * which the HTTP server checks and encodes once: serving a built document costs a header lookup, not a build.
 *
 * - `If-None-Match` naming the document's tag (any of its encodings' tags, or `*`) answers `304` without a body;
 * - `Accept-Encoding` picks `br`, then `gzip`, else the identity (q=0 refuses a coding); `Vary: Accept-Encoding`;
 * - each encoding has its own strong tag (`"<hash>"`, `"<hash>-gz"`, `"<hash>-br"`), as RFC 9110 asks of strong
 *   validators of different representations.
 */
import { createHash } from 'node:crypto';
import { brotliCompressSync, constants as zlib, gzipSync } from 'node:zlib';
import type { HttpRequest, HttpResponse } from '../../http/server.ts';

export type ContentCoding = 'identity' | 'gzip' | 'br';

/** Below this many bytes a document is always sent as it is: compression would save less than its headers. */
export const MIN_COMPRESSED_BYTES = 1024;
/** Longest `Accept-Encoding` / `If-None-Match` read; a longer one counts as absent (no client needs more). */
const MAX_NEGOTIATION_HEADER = 512;
/** brotli at a middle quality: most of the size saved, at a small part of the time quality 11 takes on megabytes. */
const BROTLI_QUALITY = 5;
const GZIP_LEVEL = 6;

export interface BuiltDocument {
  /** The identity encoding's strong ETag, quoted. */
  readonly etag: string;
  /** Uncompressed size, bytes. */
  readonly bytes: number;
  /** The response for a request (200 in the best encoding it accepts, or 304); frozen, so the server encodes it once. */
  respond(req: Pick<HttpRequest, 'headers'>): HttpResponse;
  /** The encoded body (made now if it was not yet), for tests and for measuring. */
  encoded(coding: ContentCoding): Uint8Array;
}

/**
 * `body` as a built document with `headers` (content type, cache control, ...) on every answer. `Vary`, `ETag` and
 * `Content-Encoding` are added here.
 */
export function buildDocument(body: string | Uint8Array, headers: Readonly<Record<string, string>>): BuiltDocument {
  const identity = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const hash = createHash('sha256').update(identity).digest('base64url').slice(0, 32);
  const tags: Record<ContentCoding, string> = { identity: `"${hash}"`, gzip: `"${hash}-gz"`, br: `"${hash}-br"` };
  const compressible = identity.byteLength >= MIN_COMPRESSED_BYTES;
  const bodies: Partial<Record<ContentCoding, Uint8Array>> = { identity };
  const responses: Partial<Record<ContentCoding, HttpResponse>> = {};
  const notModified: Partial<Record<ContentCoding, HttpResponse>> = {};
  const common = { ...headers, vary: 'accept-encoding' };

  const encoded = (coding: ContentCoding): Uint8Array => {
    let out = bodies[coding];
    if (out === undefined) {
      out =
        coding === 'gzip'
          ? gzipSync(identity, { level: GZIP_LEVEL })
          : brotliCompressSync(identity, {
              params: { [zlib.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY, [zlib.BROTLI_PARAM_SIZE_HINT]: identity.byteLength, [zlib.BROTLI_PARAM_MODE]: zlib.BROTLI_MODE_TEXT },
            });
      bodies[coding] = out;
    }
    return out;
  };
  const ok = (coding: ContentCoding): HttpResponse => {
    let r = responses[coding];
    if (r === undefined) {
      const h = Object.freeze({ ...common, etag: tags[coding], ...(coding === 'identity' ? {} : { 'content-encoding': coding }) });
      r = Object.freeze({ status: 200, headers: h, body: encoded(coding) });
      responses[coding] = r;
    }
    return r;
  };
  const unchanged = (coding: ContentCoding): HttpResponse => {
    let r = notModified[coding];
    if (r === undefined) {
      const h: Record<string, string> = { vary: 'accept-encoding', etag: tags[coding] };
      if (headers['cache-control'] !== undefined) h['cache-control'] = headers['cache-control'];
      r = Object.freeze({ status: 304, headers: Object.freeze(h) });
      notModified[coding] = r;
    }
    return r;
  };
  return {
    etag: tags.identity,
    bytes: identity.byteLength,
    encoded,
    respond(req) {
      const coding = compressible ? chooseCoding(req.headers['accept-encoding']) : 'identity';
      const inm = req.headers['if-none-match'];
      if (inm !== undefined && inm.length <= MAX_NEGOTIATION_HEADER && matchesAny(inm, tags)) return unchanged(coding);
      return ok(coding);
    },
  };
}

/** Whether an `If-None-Match` list names one of `tags` (weak comparison, as RFC 9110 asks for it), or is `*`. */
function matchesAny(header: string, tags: Record<ContentCoding, string>): boolean {
  for (const raw of header.split(',')) {
    const t = raw.trim();
    if (t === '*') return true;
    const opaque = t.startsWith('W/') ? t.slice(2) : t;
    if (opaque === tags.identity || opaque === tags.gzip || opaque === tags.br) return true;
  }
  return false;
}

/** The coding to answer in: `br` if accepted, else `gzip`, else the identity. Pure. */
export function chooseCoding(header: string | undefined): ContentCoding {
  if (header === undefined || header.length > MAX_NEGOTIATION_HEADER) return 'identity';
  let br = false;
  let gzip = false;
  let star = false;
  const refused = new Set<string>();
  for (const part of header.toLowerCase().split(',')) {
    const [name = '', ...params] = part.split(';').map((s) => s.trim());
    const q = params.find((p) => p.startsWith('q='));
    const weight = q === undefined ? 1 : Number(q.slice(2));
    if (!(weight > 0)) {
      refused.add(name);
      continue;
    }
    if (name === 'br') br = true;
    else if (name === 'gzip' || name === 'x-gzip') gzip = true;
    else if (name === '*') star = true;
  }
  if (br || (star && !refused.has('br'))) return 'br';
  if (gzip || (star && !refused.has('gzip'))) return 'gzip';
  return 'identity';
}
