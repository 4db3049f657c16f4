/**
 * Which IP addresses a merchant's upstream may never resolve to: everything that is not ordinary public
 * unicast (loopback, private, link-local, CGNAT, multicast, documentation, benchmarking, cloud metadata, ...),
 * for IPv4 and IPv6, including IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4, Teredo).
 *
 * Pure and synchronous. Anything that does not parse as an IP address counts as forbidden (fail closed).
 *
 * IPv6 policy: only the global unicast block 2000::/3 is allowed, minus its special-purpose parts; outside it,
 * only the IPv4-mapped (::ffff:0:0/96) and NAT64 (64:ff9b::/96) forms are judged by their embedded IPv4
 * address. IPv4-compatible addresses (::/96, deprecated by RFC 4291) are always forbidden.
 */
import { isIPv4, isIPv6 } from 'node:net';

export type IpFamily = 4 | 6;

/** An IP address as an unsigned integer: 32 bits for IPv4, 128 bits for IPv6. */
export interface ParsedIp {
  family: IpFamily;
  value: bigint;
}

export interface Cidr {
  family: IpFamily;
  /** The network address (host bits cleared). */
  base: bigint;
  prefix: number;
}

const BITS: Record<IpFamily, number> = { 4: 32, 6: 128 };
const MASK32 = 0xffffffffn;

function parseIpv4(text: string): bigint | undefined {
  if (!isIPv4(text)) return undefined;
  let v = 0n;
  for (const part of text.split('.')) v = (v << 8n) | BigInt(Number(part));
  return v;
}

function parseIpv6(text: string): bigint | undefined {
  if (!isIPv6(text)) return undefined;
  let rest = text;
  const zone = rest.indexOf('%');
  if (zone >= 0) rest = rest.slice(0, zone);
  let tail: bigint[] = [];
  // An embedded dotted quad in the last 32 bits (`::ffff:1.2.3.4`) becomes two hex groups.
  const lastColon = rest.lastIndexOf(':');
  const last = rest.slice(lastColon + 1);
  if (last.includes('.')) {
    const v4 = parseIpv4(last);
    if (v4 === undefined) return undefined;
    tail = [v4 >> 16n, v4 & 0xffffn];
    rest = rest.slice(0, lastColon + 1);
    if (rest.endsWith(':') && !rest.endsWith('::')) rest = rest.slice(0, -1);
  }
  const groups = (s: string): bigint[] => (s === '' ? [] : s.split(':').map((g) => BigInt(`0x${g}`)));
  const gap = rest.indexOf('::');
  let words: bigint[];
  if (gap >= 0) {
    const head = groups(rest.slice(0, gap));
    const back = [...groups(rest.slice(gap + 2)), ...tail];
    const fill = 8 - head.length - back.length;
    if (fill < 0) return undefined;
    words = [...head, ...Array.from({ length: fill }, () => 0n), ...back];
  } else {
    words = [...groups(rest), ...tail];
  }
  if (words.length !== 8) return undefined;
  return words.reduce((acc, w) => (acc << 16n) | w, 0n);
}

/**
 * Parses an IPv4 dotted quad or IPv6 text (optionally in brackets, optionally with a `%zone`);
 * `undefined` for anything else (including the legacy `0x7f.1` / `2130706433` IPv4 spellings).
 */
export function parseIp(text: string): ParsedIp | undefined {
  let t = text.trim();
  if (t.startsWith('[') && t.endsWith(']')) t = t.slice(1, -1);
  const v4 = parseIpv4(t);
  if (v4 !== undefined) return { family: 4, value: v4 };
  const v6 = parseIpv6(t);
  if (v6 !== undefined) return { family: 6, value: v6 };
  return undefined;
}

/** `10.0.0.0/8`, `fc00::/7`, or a single address (a /32 or /128). Host bits are cleared. */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (!ip) return undefined;
  const bits = BITS[ip.family];
  let prefix = bits;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p)) return undefined;
    prefix = Number(p);
    if (prefix > bits) return undefined;
  }
  const shift = BigInt(bits - prefix);
  return { family: ip.family, base: (ip.value >> shift) << shift, prefix };
}

export function cidrContains(cidr: Cidr, ip: ParsedIp): boolean {
  if (cidr.family !== ip.family) return false;
  const shift = BigInt(BITS[ip.family] - cidr.prefix);
  return ip.value >> shift === cidr.base >> shift;
}

/** An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as the IPv4 address it denotes; others unchanged. */
export function unmapIp(ip: ParsedIp): ParsedIp {
  if (ip.family === 6 && ip.value >> 32n === 0xffffn) return { family: 4, value: ip.value & MASK32 };
  return ip;
}

function cidr(text: string): Cidr {
  const c = parseCidr(text);
  if (!c) throw new Error(`bad built-in CIDR ${text}`);
  return c;
}

type Range = readonly [Cidr, string];

/** IANA IPv4 special-purpose registry entries that are not globally reachable, plus metadata services. */
const V4_FORBIDDEN: readonly Range[] = [
  [cidr('0.0.0.0/8'), 'this network / unspecified'],
  [cidr('10.0.0.0/8'), 'private network'],
  [cidr('100.64.0.0/10'), 'carrier-grade NAT'],
  [cidr('127.0.0.0/8'), 'loopback'],
  [cidr('169.254.169.254/32'), 'cloud metadata service'],
  [cidr('169.254.0.0/16'), 'link-local'],
  [cidr('172.16.0.0/12'), 'private network'],
  [cidr('192.0.0.0/24'), 'IETF protocol assignments'],
  [cidr('192.0.2.0/24'), 'documentation'],
  [cidr('192.88.99.0/24'), '6to4 relay anycast'],
  [cidr('192.168.0.0/16'), 'private network'],
  [cidr('198.18.0.0/15'), 'benchmarking'],
  [cidr('198.51.100.0/24'), 'documentation'],
  [cidr('203.0.113.0/24'), 'documentation'],
  [cidr('224.0.0.0/4'), 'multicast'],
  [cidr('255.255.255.255/32'), 'broadcast'],
  [cidr('240.0.0.0/4'), 'reserved'],
  // Azure's WireServer / instance metadata endpoint is a public-looking address reachable only from inside Azure.
  [cidr('168.63.129.16/32'), 'cloud metadata service'],
];

/** Forbidden parts of 2000::/3 (everything outside 2000::/3 is forbidden anyway). */
const V6_GLOBAL_FORBIDDEN: readonly Range[] = [
  [cidr('2001::/23'), 'IETF protocol assignments'], // includes benchmarking 2001:2::/48 and ORCHID
  [cidr('2001:db8::/32'), 'documentation'],
  [cidr('3fff::/20'), 'documentation'],
];

const V6_GLOBAL_UNICAST = cidr('2000::/3');
const V6_MAPPED = cidr('::ffff:0:0/96');
const V6_COMPAT = cidr('::/96');
const V6_NAT64 = cidr('64:ff9b::/96');
const V6_6TO4 = cidr('2002::/16');
const V6_TEREDO = cidr('2001::/32');
const V6_NAMED: readonly Range[] = [
  [cidr('::1/128'), 'loopback'],
  [cidr('::/128'), 'unspecified'],
  [cidr('fc00::/7'), 'unique local address'],
  [cidr('fe80::/10'), 'link-local'],
  [cidr('fec0::/10'), 'site-local'],
  [cidr('ff00::/8'), 'multicast'],
];

function v4Reason(value: bigint): string | undefined {
  const ip: ParsedIp = { family: 4, value };
  for (const [range, name] of V4_FORBIDDEN) if (cidrContains(range, ip)) return name;
  return undefined;
}

function v6Reason(value: bigint): string | undefined {
  const ip: ParsedIp = { family: 6, value };
  if (cidrContains(V6_MAPPED, ip)) {
    const r = v4Reason(value & MASK32);
    return r === undefined ? undefined : `IPv4-mapped ${r}`;
  }
  if (cidrContains(V6_NAT64, ip)) {
    const r = v4Reason(value & MASK32);
    return r === undefined ? undefined : `NAT64-embedded ${r}`;
  }
  for (const [range, name] of V6_NAMED) if (cidrContains(range, ip)) return name;
  if (cidrContains(V6_COMPAT, ip)) return 'IPv4-compatible (deprecated)';
  if (!cidrContains(V6_GLOBAL_UNICAST, ip)) return 'not global unicast';
  if (cidrContains(V6_6TO4, ip)) {
    const r = v4Reason((value >> 80n) & MASK32);
    return r === undefined ? undefined : `6to4-embedded ${r}`;
  }
  if (cidrContains(V6_TEREDO, ip)) {
    // Teredo: server IPv4 in bits 32..63, client IPv4 (bit-inverted) in the last 32 bits.
    const server = v4Reason((value >> 64n) & MASK32);
    const client = v4Reason(~value & MASK32);
    if (server !== undefined) return `Teredo server ${server}`;
    if (client !== undefined) return `Teredo client ${client}`;
    return undefined;
  }
  for (const [range, name] of V6_GLOBAL_FORBIDDEN) if (cidrContains(range, ip)) return name;
  return undefined;
}

/** Why `ip` is forbidden as an upstream address (e.g. `loopback`), or `undefined` when it is public unicast. */
export function forbiddenAddressReason(ip: string): string | undefined {
  const parsed = parseIp(ip);
  if (!parsed) return 'not an IP address';
  return parsed.family === 4 ? v4Reason(parsed.value) : v6Reason(parsed.value);
}

/** True unless `ip` is an ordinary public unicast address (see the module comment). Non-IP text is forbidden. */
export function isForbiddenAddress(ip: string): boolean {
  return forbiddenAddressReason(ip) !== undefined;
}
