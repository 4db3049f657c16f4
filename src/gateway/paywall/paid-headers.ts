/**
 * The headers of a paid answer. It is bought by one buyer, so no shared cache may keep it (`private, no-store`,
 * whatever the upstream said) and any cache must tell requests apart by their payment headers (`Vary`). The upstream
 * is not trusted to be well-behaved: header values that cannot be sent as they are (not printable ASCII: CR, LF,
 * other controls, non-Latin-1 or 8-bit text) are dropped rather than failing the answer after the buyer has paid, and
 * active content (HTML, XML, SVG, or no declared type at all) is sandboxed so that it cannot run in the gateway's origin.
 * Pure.
 */

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const SENDABLE_VALUE = /^[\t\x20-\x7e]*$/;
const FRAMING = new Set(['content-length', 'transfer-encoding', 'connection']);

export const PAID_CACHE_CONTROL = 'private, no-store';
export const PAID_VARY = 'PAYMENT-SIGNATURE, X-PAYMENT, Authorization';
export const ACTIVE_CONTENT_CSP = "sandbox; default-src 'none'";

/** Whether a browser could render a body of this type as a document that runs script or loads resources. */
export function rendersActiveContent(contentType: string | undefined): boolean {
  if (contentType === undefined) return true; // undeclared: a browser may sniff it into HTML
  const mime = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  if (mime === '') return true;
  return mime === 'text/html' || mime.endsWith('/xml') || mime.endsWith('+xml') || mime === 'text/xsl' || mime.startsWith('multipart/') || mime === 'application/pdf';
}

/** Only headers that can go out as they are; names lower-cased, values trimmed. */
export function sendableHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name) || typeof value !== 'string' || !SENDABLE_VALUE.test(value)) continue;
    const lower = name.toLowerCase();
    if (FRAMING.has(lower) || lower === '__proto__') continue;
    out[lower] = value.trim();
  }
  return out;
}

/** The headers of a paid 200 (or the upstream's 4xx): the upstream's sendable ones, then ours, then the payment proof. */
export function paidAnswerHeaders(upstream: Record<string, string>, payment: Record<string, string>): Record<string, string> {
  const headers = sendableHeaders(upstream);
  headers['cache-control'] = PAID_CACHE_CONTROL;
  headers.vary = PAID_VARY;
  headers['x-content-type-options'] = 'nosniff';
  if (rendersActiveContent(headers['content-type'])) headers['content-security-policy'] = ACTIVE_CONTENT_CSP;
  return { ...headers, ...payment };
}
