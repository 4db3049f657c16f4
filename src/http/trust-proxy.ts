/**
 * Which `X-Forwarded-For` entry is the client, behind reverse proxies (`GATE402_TRUST_PROXY`).
 *
 * Every proxy appends the address it received the request from, so the list reads client-first, nearest-last, and
 * whatever the client itself sent is on the left. Only the right-most entries, written by proxies the operator
 * runs, can be believed: the client is the right-most address not written by a trusted proxy. Two ways to say
 * which proxies are trusted:
 * - a count (`1`, `2`, ...; `true` means 1): that many proxies stand in front, the socket peer being the nearest;
 * - a list of addresses or CIDR blocks (`10.0.0.0/8,192.168.1.5,::1`): walking from the socket peer leftwards,
 *   every address in the list is a proxy, and the first one that is not is the client.
 * An entry that is not an IP address stops the walk: the last address known is then taken (never an address
 * further left, which the client may have written). Off (`false`, the default), the socket peer is the client.
 */
import { ConfigError } from '../config/env.ts';
import { cidrContains, normalizeIp, parseCidr, parseIp, unmapIp, type Cidr } from './ip.ts';

export type TrustProxy = false | { readonly hops: number } | { readonly cidrs: readonly Cidr[] };

const MAX_HOPS = 32;

/** `GATE402_TRUST_PROXY`'s text as a policy; throws a TypeError saying what is accepted. */
export function parseTrustProxy(text: string | undefined): TrustProxy {
  const t = (text ?? '').trim().toLowerCase();
  if (['', '0', 'false', 'no', 'off'].includes(t)) return false;
  if (['true', 'yes', 'on'].includes(t)) return { hops: 1 };
  if (/^\d+$/.test(t)) {
    const hops = Number(t);
    if (hops > MAX_HOPS) throw new TypeError(`a proxy count must be at most ${MAX_HOPS}, got ${hops}`);
    return { hops };
  }
  const cidrs: Cidr[] = [];
  for (const entry of t
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const c = parseCidr(entry);
    if (!c) throw new TypeError(`expected true/false, a proxy count or a list of proxy addresses/CIDR blocks, got '${entry}'`);
    cidrs.push(c);
  }
  return { cidrs };
}

export function trustProxyFromEnv(env: NodeJS.ProcessEnv, name = 'GATE402_TRUST_PROXY'): TrustProxy {
  try {
    return parseTrustProxy(env[name]);
  } catch (e) {
    throw new ConfigError(`${name}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

function trusted(cidrs: readonly Cidr[], ip: string): boolean {
  const parsed = parseIp(ip);
  if (!parsed) return false;
  const plain = unmapIp(parsed);
  return cidrs.some((c) => cidrContains(c, plain) || cidrContains(c, parsed));
}

/**
 * The client's canonical IP: `peer` (the socket's, canonical) unless trusted proxies stand in front; then the
 * right-most untrusted hop of `forwardedFor` (several header lines arrive joined with `, `).
 */
export function clientIp(peer: string, forwardedFor: string | undefined, trust: TrustProxy): string {
  if (trust === false || forwardedFor === undefined) return peer;
  const hops = forwardedFor.split(',').reverse(); // nearest first
  let current = peer;
  for (let i = 0; i < hops.length; i++) {
    const isProxy = 'hops' in trust ? i < trust.hops : trusted(trust.cidrs, current);
    if (!isProxy) break;
    const next = normalizeIp(hops[i]!);
    if (next === undefined) break;
    current = next;
  }
  return current;
}
