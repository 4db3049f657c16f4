/**
 * IP addresses as text, read with ipaddr.js: strict parsing, CIDR blocks, and one canonical spelling of the socket's
 * peer address and of `X-Forwarded-For` entries, so that they can key a rate limiter.
 *
 * Canonical form: IPv4 dotted quad; IPv6 in RFC 5952 form (lower case, longest zero run as `::`);
 * an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) becomes the plain IPv4 address.
 */
import { Buffer } from 'node:buffer';
import { isIPv4, isIPv6 } from 'node:net';
import ipaddr from 'ipaddr.js';

export type Ip = ipaddr.IPv4 | ipaddr.IPv6;
/** A CIDR block: its address and prefix length. */
export type Cidr = readonly [Ip, number];

/**
 * An IPv4 dotted quad or IPv6 text (optionally in brackets, optionally with a `%zone`); `undefined` for anything
 * else. The legacy IPv4 spellings that ipaddr.js and inet_aton accept (`0x7f.1`, `2130706433`, `127.1`) are refused:
 * a guard must not read an address differently from the resolver it guards.
 */
export function parseIp(text: string): Ip | undefined {
  let t = text.trim();
  if (t.startsWith('[') && t.endsWith(']')) t = t.slice(1, -1);
  if (isIPv4(t)) return ipaddr.IPv4.parse(t);
  if (isIPv6(t)) return parseIpv6(t);
  return undefined;
}

/**
 * Valid IPv6 text (node:net's isIPv6) as ipaddr.js's IPv6, its trailing dotted quad given as two hex groups first:
 * ipaddr.js reads the deprecated IPv4-compatible `::1.2.3.4` as the IPv4-mapped `::ffff:1.2.3.4`, a different
 * address from the one the socket would connect to.
 */
function parseIpv6(text: string): ipaddr.IPv6 {
  const quad = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)(%.*)?$/.exec(text);
  if (!quad) return ipaddr.IPv6.parse(text);
  const [a, b, c, d] = quad.slice(2, 6).map(Number) as [number, number, number, number];
  const hex = `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  return ipaddr.IPv6.parse(`${quad[1]}${hex}${quad[6] ?? ''}`);
}

/** `10.0.0.0/8`, `fc00::/7`, or a single address (a /32 or /128). */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (!ip) return undefined;
  const bits = ip.kind() === 'ipv4' ? 32 : 128;
  if (slash < 0) return [ip, bits];
  const p = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(p) || Number(p) > bits) return undefined;
  return [ip, Number(p)];
}

export function cidrContains(cidr: Cidr, ip: Ip): boolean {
  return cidr[0].kind() === ip.kind() && ip.match(cidr[0], cidr[1]);
}

/** An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as the IPv4 address it denotes; others unchanged. */
export function unmapIp(ip: Ip): Ip {
  return ip instanceof ipaddr.IPv6 && ip.isIPv4MappedAddress() ? ip.toIPv4Address() : ip;
}

/** A block inside ::ffff:0:0/96 (`::ffff:127.0.0.1`, `::ffff:10.0.0.0/104`) as the IPv4 block it denotes; others unchanged. */
export function unmapCidr(c: Cidr): Cidr {
  const [ip, prefix] = c;
  return ip instanceof ipaddr.IPv6 && prefix >= 96 && ip.isIPv4MappedAddress() ? [ip.toIPv4Address(), prefix - 96] : c;
}

function canonical(ip: Ip): string {
  const plain = unmapIp(ip);
  return plain instanceof ipaddr.IPv6 ? plain.toRFC5952String() : plain.toString();
}

/** RFC 5952 text (or the IPv4 address of a mapped one) of valid IPv6 text; zone ids (`%eth0`) are refused. */
function canonicalIpv6(text: string): string | undefined {
  return isIPv6(text) && !text.includes('%') ? canonical(parseIpv6(text)) : undefined;
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
    return canonicalIpv6(text);
  }
  if (isIPv4(text)) return text;
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(text);
  if (withPort && isIPv4(withPort[1]!)) return withPort[1];
  return canonicalIpv6(text);
}

/**
 * Formats a binary peer address (4 or 16 bytes, as uWS `getRemoteAddress()` returns it).
 * `fallbackText` (uWS `getRemoteAddressAsText()`, which spells IPv6 fully expanded, e.g.
 * `0000:0000:0000:0000:0000:ffff:7f00:0001`) is used only for an unexpected length.
 */
export function formatBinaryAddress(bin: ArrayBuffer, fallbackText?: ArrayBuffer): string {
  const b = new Uint8Array(bin);
  if (b.length === 4 || b.length === 16) return canonical(ipaddr.fromByteArray([...b]));
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
  if (!ip.includes(':') || !isIPv6(ip)) return ip;
  const { parts } = parseIpv6(ip);
  return `${parts
    .slice(0, 4)
    .map((p) => p.toString(16))
    .join(':')}::/64`;
}
