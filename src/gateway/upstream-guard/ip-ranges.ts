/**
 * Which IP addresses a merchant's upstream may never resolve to: everything that is not ordinary public
 * unicast (loopback, private, link-local, CGNAT, multicast, documentation, benchmarking, cloud metadata, ...),
 * for IPv4 and IPv6, including IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4, Teredo).
 *
 * The special-purpose registries are ipaddr.js's `range()` (IANA's IPv4 and IPv6 special-purpose address
 * registries): any address it does not call `unicast` is forbidden. This module adds what a registry cannot know:
 * cloud metadata addresses that look public, and the IPv4 address inside an IPv6 form that embeds one.
 *
 * Pure and synchronous. Anything that does not parse as an IP address counts as forbidden (fail closed).
 *
 * IPv6 policy: only the global unicast block 2000::/3 is allowed, minus its special-purpose parts; outside it,
 * only the IPv4-mapped (::ffff:0:0/96) and NAT64 (64:ff9b::/96) forms are judged by their embedded IPv4
 * address. IPv4-compatible addresses (::/96, deprecated by RFC 4291) are always forbidden.
 */
import ipaddr from 'ipaddr.js';
import { cidrContains, parseCidr, parseIp, type Cidr } from '../../http/ip.ts';

function cidr(text: string): Cidr {
  const c = parseCidr(text);
  if (!c) throw new Error(`bad built-in CIDR ${text}`);
  return c;
}

/** Addresses that look like public unicast but answer only from inside a cloud. */
const V4_METADATA: readonly Cidr[] = [
  cidr('169.254.169.254/32'), // AWS, GCP, Azure, OpenStack instance metadata (also link-local)
  cidr('168.63.129.16/32'), // Azure WireServer
];

/** ipaddr.js's range names, as an operator reads them in a refusal. */
const RANGE_NAMES: Readonly<Record<string, string>> = {
  unspecified: 'this network / unspecified',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link-local',
  loopback: 'loopback',
  carrierGradeNat: 'carrier-grade NAT',
  private: 'private network',
  reserved: 'reserved (IETF, documentation, benchmarking)',
  as112: 'AS112 DNS sink',
  as112v6: 'AS112 DNS sink',
  amt: 'AMT relay anycast',
  uniqueLocal: 'unique local address',
  deprecatedSiteLocal: 'site-local',
  discard: 'discard-only',
  rfc6145: 'IPv4-translated',
  rfc6052: 'local-use NAT64',
  benchmarking: 'benchmarking',
  deprecatedOrchid: 'ORCHID',
  orchid2: 'ORCHIDv2',
  droneRemoteIdProtocolEntityTags: 'drone remote ID tags',
  segmentRouting: 'segment routing SIDs',
};

const rangeName = (range: string) => RANGE_NAMES[range] ?? range;

const V6_GLOBAL_UNICAST = cidr('2000::/3');
const V6_COMPAT = cidr('::/96');
const V6_NAT64 = cidr('64:ff9b::/96');

/** The IPv4 address in 16-bit words `hi` and `lo` of an IPv6 address. */
const v4Of = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);

function v4Reason(ip: ipaddr.IPv4): string | undefined {
  if (V4_METADATA.some((c) => cidrContains(c, ip))) return 'cloud metadata service';
  const range = ip.range();
  return range === 'unicast' ? undefined : rangeName(range);
}

function v6Reason(ip: ipaddr.IPv6): string | undefined {
  const w = ip.parts as [number, number, number, number, number, number, number, number];
  const range: string = ip.range();
  const embedded = (form: string, v4: ipaddr.IPv4) => {
    const r = v4Reason(v4);
    return r === undefined ? undefined : `${form} ${r}`;
  };
  switch (range) {
    case 'ipv4Mapped':
      return embedded('IPv4-mapped', ip.toIPv4Address());
    case 'rfc6052':
      // 64:ff9b::/96 is translated to its IPv4 address; the local-use 64:ff9b:1::/48 (RFC 8215) is forbidden.
      return cidrContains(V6_NAT64, ip) ? embedded('NAT64-embedded', v4Of(w[6], w[7])) : rangeName(range);
    case '6to4':
      return embedded('6to4-embedded', v4Of(w[1], w[2]));
    case 'teredo':
      // Teredo: server IPv4 in words 2 and 3, client IPv4 (bit-inverted) in words 6 and 7.
      return embedded('Teredo server', v4Of(w[2], w[3])) ?? embedded('Teredo client', v4Of(~w[6] & 0xffff, ~w[7] & 0xffff));
    case 'unicast':
      if (cidrContains(V6_COMPAT, ip)) return 'IPv4-compatible (deprecated)';
      return cidrContains(V6_GLOBAL_UNICAST, ip) ? undefined : 'not global unicast';
    default:
      return rangeName(range);
  }
}

/** Why `ip` is forbidden as an upstream address (e.g. `loopback`), or `undefined` when it is public unicast. */
export function forbiddenAddressReason(ip: string): string | undefined {
  const parsed = parseIp(ip);
  if (!parsed) return 'not an IP address';
  return parsed instanceof ipaddr.IPv6 ? v6Reason(parsed) : v4Reason(parsed);
}

/** True unless `ip` is an ordinary public unicast address (see the module comment). Non-IP text is forbidden. */
export function isForbiddenAddress(ip: string): boolean {
  return forbiddenAddressReason(ip) !== undefined;
}
