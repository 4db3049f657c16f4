/**
 * Client IP addresses as text: the socket's peer address (binary, from uWS) and `X-Forwarded-For`
 * entries, both normalised to one canonical spelling so that they can key a rate limiter.
 *
 * Canonical form: IPv4 dotted quad; IPv6 in RFC 5952 form (lower case, longest zero run as `::`);
 * an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) becomes the plain IPv4 address.
 */
import { Buffer } from 'node:buffer';
import { isIPv4, isIPv6 } from 'node:net';

const MAPPED_PREFIX = '::ffff:';

/** RFC 5952 text of an IPv6 address given as valid IPv6 text (the WHATWG URL serializer implements it). */
function canonicalIpv6(text: string): string | undefined {
  try {
    const host = new URL(`http://[${text}]/`).hostname; // "[...]"
    const inner = host.slice(1, -1);
    if (inner.startsWith(MAPPED_PREFIX)) {
      const rest = inner.slice(MAPPED_PREFIX.length).split(':');
      if (rest.length === 2) {
        const hi = Number.parseInt(rest[0]!, 16);
        const lo = Number.parseInt(rest[1]!, 16);
        return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
      }
    }
    return inner;
  } catch {
    return undefined;
  }
}

/**
 * Normalises one IP address given as text; `undefined` when it is not an IP address.
 * Accepts `1.2.3.4`, `1.2.3.4:port`, IPv6 text, `[v6]` and `[v6]:port`. Zone ids (`%eth0`) are rejected.
 */
export function normalizeIp(raw: string): string | undefined {
  let text = raw.trim();
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) return undefined;
    const after = text.slice(close + 1);
    if (after !== '' && !/^:\d{1,5}$/.test(after)) return undefined;
    text = text.slice(1, close);
    return isIPv6(text) ? canonicalIpv6(text) : undefined;
  }
  if (isIPv4(text)) return text;
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(text);
  if (withPort && isIPv4(withPort[1]!)) return withPort[1];
  if (isIPv6(text)) return canonicalIpv6(text);
  return undefined;
}

/**
 * Formats a binary peer address (4 or 16 bytes, as uWS `getRemoteAddress()` returns it).
 * `fallbackText` (uWS `getRemoteAddressAsText()`, which spells IPv6 fully expanded, e.g.
 * `0000:0000:0000:0000:0000:ffff:7f00:0001`) is used only for an unexpected length.
 */
export function formatBinaryAddress(bin: ArrayBuffer, fallbackText?: ArrayBuffer): string {
  const b = new Uint8Array(bin);
  if (b.length === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  if (b.length === 16) {
    const groups: string[] = [];
    for (let i = 0; i < 16; i += 2) groups.push(((b[i]! << 8) | b[i + 1]!).toString(16));
    return canonicalIpv6(groups.join(':')) ?? groups.join(':');
  }
  if (fallbackText !== undefined) {
    const text = Buffer.from(fallbackText).toString('latin1');
    return normalizeIp(text) ?? text;
  }
  return '';
}

/**
 * A rate-limiting key for a canonical IP: the address itself for IPv4, its /64 prefix for IPv6
 * (one IPv6 subscriber typically controls a whole /64, so per-address keys would be trivial to evade).
 */
export function ipRateLimitKey(ip: string): string {
  if (!ip.includes(':')) return ip;
  try {
    const inner = new URL(`http://[${ip}]/`).hostname.slice(1, -1);
    // expand to 8 groups, keep the first 4
    const [head = '', tail = ''] = inner.includes('::') ? inner.split('::') : [inner, ''];
    const h = head === '' ? [] : head.split(':');
    const t = tail === '' ? [] : tail.split(':');
    const groups = [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
    return `${groups.slice(0, 4).join(':')}::/64`;
  } catch {
    return ip;
  }
}
