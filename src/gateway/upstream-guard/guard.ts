/**
 * The upstream address guard: a merchant's upstream must be on the public internet, never on the gateway's own
 * host or network (SSRF). Two checks, one policy ({@link isForbiddenAddress} unless the operator allowlisted it):
 *
 * - {@link checkUpstreamUrl} at registration: parse the URL, resolve its host, refuse when any address is forbidden;
 * - {@link guardedDispatcher} at request time: an undici `Agent` whose connector checks again at connect time, on
 *   the very addresses the socket connects to, so a DNS answer that changes after registration (DNS rebinding)
 *   cannot reach a forbidden address either. IP-literal hosts (which Node connects to without any lookup) are
 *   checked before connecting, and the socket's actual peer address is checked once more after connecting.
 *
 * Allowlist entries are host names (exact, case-insensitive, trailing dot ignored: the operator trusts that name's
 * DNS), IP addresses or CIDR blocks (`127.0.0.1`, `10.1.0.0/16`, `::1`), each optionally with one port
 * (`127.0.0.1:8080`, `[::1]:8080`, `devnet.local:8080`). An IPv4-mapped IPv6 address is matched as the IPv4 address
 * it denotes.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import { isIP, type LookupFunction, type Socket } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { cidrContains, parseCidr, parseIp, unmapCidr, unmapIp, type Cidr } from '../../http/ip.ts';
import { forbiddenAddressReason } from './ip-ranges.ts';
import { ok, type Err, type Failure, type Ok } from '../../protocol/result.ts';

/** Resolves a host name to its IP addresses (text). */
export type Resolver = (host: string) => Promise<string[]>;

/** A TCP port, or `undefined` for an entry that allows every port. */
type Port = number | undefined;

/**
 * The operator's exceptions to the forbidden ranges. An entry without a port allows every port of its host or
 * block; `host:port`, `a.b.c.d:port` or `[v6]:port` allows that one port only (the devnet allows exactly the
 * fixture upstreams it started, not the chain RPCs or the gateway on the same host).
 *
 * `port` arguments: the port that will be connected to; `undefined` when it is not known yet (a DNS lookup), which
 * matches port-scoped entries too, so the caller must check again with the port (the connector does, on the peer).
 */
export class UpstreamAllowlist {
  readonly #hosts: Array<{ host: string; port: Port }> = [];
  readonly #cidrs: Array<{ cidr: Cidr; port: Port }> = [];

  /** Throws a TypeError naming the first entry that is neither a host name, an IP address nor a CIDR block (each with an optional port). */
  constructor(entries: readonly string[]) {
    for (const raw of entries) {
      const entry = raw.trim();
      if (entry === '') continue;
      const { target, port } = splitPort(entry);
      const c = port === null ? undefined : parseCidr(target);
      if (c && port !== null) this.#cidrs.push({ cidr: unmapCidr(c), port });
      else if (port !== null && /^[a-z0-9.-]+$/i.test(target)) this.#hosts.push({ host: normalizeHost(target), port });
      else throw new TypeError(`upstream allowlist entry ${JSON.stringify(raw)} is not a host name, IP address or CIDR block (with an optional :port)`);
    }
  }

  get empty(): boolean {
    return this.#hosts.length === 0 && this.#cidrs.length === 0;
  }

  /** The host name itself is allowlisted (an IP-literal host is matched as an address instead). */
  allowsHost(host: string, port?: number): boolean {
    const h = stripBrackets(host);
    if (isIP(h) !== 0) return this.allowsAddress(h, port);
    const name = normalizeHost(h);
    return this.#hosts.some((e) => e.host === name && portMatches(e.port, port));
  }

  allowsAddress(address: string, port?: number): boolean {
    const ip = parseIp(address);
    if (!ip) return false;
    const u = unmapIp(ip);
    return this.#cidrs.some((e) => cidrContains(e.cidr, u) && portMatches(e.port, port));
  }
}

function portMatches(entry: Port, wanted: Port): boolean {
  return entry === undefined || wanted === undefined || entry === wanted;
}

/** `target` and its port (`undefined`: none given; `null`: given but not a port). IPv6 takes a port only in brackets. */
function splitPort(entry: string): { target: string; port: Port | null } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracketed) return { target: bracketed[1]!, port: bracketed[2] === undefined ? undefined : toPort(bracketed[2]) };
  const colon = entry.lastIndexOf(':');
  if (colon < 0 || entry.indexOf(':') !== colon) return { target: entry, port: undefined };
  const p = entry.slice(colon + 1);
  return { target: entry.slice(0, colon), port: /^\d+$/.test(p) ? toPort(p) : null };
}

function toPort(text: string): number | null {
  const n = Number(text);
  return Number.isInteger(n) && n >= 1 && n <= 65535 ? n : null;
}

/** The port a URL connects to: its own, or its scheme's default. */
export function urlPort(url: URL): number {
  return url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
}

function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

function normalizeHost(host: string): string {
  return host.toLowerCase().replace(/\.$/, '');
}

function toAllowlist(a: UpstreamAllowlist | readonly string[]): UpstreamAllowlist {
  return a instanceof UpstreamAllowlist ? a : new UpstreamAllowlist(a);
}

/** Why the address may not be used for this host and port (`undefined`: not known yet), or `undefined` when it may. */
function addressVerdict(allowlist: UpstreamAllowlist, host: string, address: string, port: number | undefined): string | undefined {
  if (allowlist.allowsHost(host, port) || allowlist.allowsAddress(address, port)) return undefined;
  return forbiddenAddressReason(address);
}

export type UpstreamCheckCode = 'invalid_url' | 'unsupported_scheme' | 'unresolvable' | 'forbidden_address';

/**
 * Why an upstream URL is refused. The `message` is safe to show the merchant (it never contains a resolved address:
 * the gateway's view of DNS is not the merchant's business). `detail` may name the address and its range: a field
 * for operator logs only, never answered.
 */
export interface UpstreamRefusal extends Failure<UpstreamCheckCode> {
  detail?: string;
}

export type UpstreamCheck = Ok<{ url: URL; host: string; addresses: string[] }> | Err<UpstreamRefusal>;

const upstreamRefused = (code: UpstreamCheckCode, message: string, detail?: string): Err<UpstreamRefusal> => ({ ok: false, error: { code, message, ...(detail !== undefined ? { detail } : {}) } });

export interface CheckUpstreamOptions {
  allowlist: UpstreamAllowlist | readonly string[];
  /** Injectable DNS; defaults to {@link systemResolver}. */
  resolve?: Resolver;
  /** Give up resolving after this long (default 5000 ms). */
  resolveTimeoutMs?: number;
}

/** `dns.lookup(host, {all: true})`, the resolver the operating system's connect path uses too. */
export const systemResolver: Resolver = (host) =>
  new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => {
      if (err) reject(err);
      else resolve(addresses.map((a) => a.address));
    });
  });

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

/**
 * Checks that `url` is an http(s) URL whose host resolves only to addresses an upstream may use. Never throws.
 * (Scheme policy beyond http/https, credentials and fragments are the registration validator's business.)
 */
export async function checkUpstreamUrl(url: string | URL, options: CheckUpstreamOptions): Promise<UpstreamCheck> {
  let parsed: URL;
  try {
    parsed = typeof url === 'string' ? new URL(url) : new URL(url.href);
  } catch {
    return upstreamRefused('invalid_url', 'upstream URL is not a valid absolute URL');
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') {
    return upstreamRefused('unsupported_scheme', `upstream URL scheme ${parsed.protocol} is not http(s)`);
  }
  let allowlist: UpstreamAllowlist;
  try {
    allowlist = toAllowlist(options.allowlist);
  } catch (e) {
    return upstreamRefused('invalid_url', 'upstream allowlist is misconfigured', e instanceof Error ? e.message : String(e));
  }
  const host = stripBrackets(parsed.hostname);
  const publicError = `upstream host ${host} does not resolve to a public address`;
  let addresses: string[];
  if (isIP(host) !== 0) {
    addresses = [host];
  } else {
    try {
      addresses = await withTimeout((options.resolve ?? systemResolver)(host), options.resolveTimeoutMs ?? 5000);
    } catch (e) {
      return upstreamRefused('unresolvable', publicError, e instanceof Error ? e.message : String(e));
    }
    if (!Array.isArray(addresses) || addresses.length === 0) return upstreamRefused('unresolvable', publicError, 'no addresses');
  }
  for (const address of addresses) {
    const reason = typeof address === 'string' ? addressVerdict(allowlist, host, address, urlPort(parsed)) : 'not an IP address';
    if (reason !== undefined) return upstreamRefused('forbidden_address', publicError, `${String(address)}: ${reason}`);
  }
  return ok({ url: parsed, host, addresses: [...addresses] });
}

/** The connection error of a {@link guardedDispatcher} refusing an address. */
export class UpstreamAddressForbiddenError extends Error {
  readonly code = 'GATE402_UPSTREAM_ADDRESS_FORBIDDEN';
  readonly host: string;
  readonly address: string;
  readonly reason: string;
  constructor(host: string, address: string, reason: string) {
    super(`refusing to connect to upstream ${host}: address ${address} is forbidden (${reason})`);
    this.host = host;
    this.address = address;
    this.reason = reason;
    this.name = 'UpstreamAddressForbiddenError';
  }
}

export interface GuardedDispatcherOptions {
  /** TCP (+TLS) connect timeout, ms (default 10 000). */
  connectTimeoutMs?: number;
  /** Time to receive the response headers, ms (default 30 000). */
  headersTimeoutMs?: number;
  /** Longest gap between response body chunks, ms (default 30 000). */
  bodyTimeoutMs?: number;
  /** Idle keep-alive socket lifetime, ms (default 4 000; capped by server hints up to keepAliveMaxTimeoutMs). */
  keepAliveTimeoutMs?: number;
  /** Default 60 000. */
  keepAliveMaxTimeoutMs?: number;
  /** Pooled connections per origin (default 32). */
  connectionsPerOrigin?: number;
  /** Fail a response whose body is larger than this (bytes); unlimited when absent. */
  maxResponseBytes?: number;
  /** Injectable DNS for the connect-time lookup (tests); defaults to the system resolver with the socket's options. */
  resolve?: Resolver;
}

function familyOf(address: string): 4 | 6 {
  return isIP(address) === 6 ? 6 : 4;
}

/**
 * A `net.connect` lookup that resolves `hostname`, then fails with {@link UpstreamAddressForbiddenError} if any
 * answer is forbidden and not allowlisted (refusing outright rather than filtering: a name that answers with
 * a private address is not a trustworthy upstream).
 */
export function guardedLookup(allowlist: UpstreamAllowlist | readonly string[], resolve?: Resolver): LookupFunction {
  const list = toAllowlist(allowlist);
  return (hostname, options, callback) => {
    const done = (err: NodeJS.ErrnoException | null, found: LookupAddress[]): void => {
      if (err) {
        callback(err, '', 0);
        return;
      }
      for (const a of found) {
        // The port is not known here: port-scoped entries pass, and the connector checks the peer with its port.
        const reason = addressVerdict(list, hostname, a.address, undefined);
        if (reason !== undefined) {
          callback(new UpstreamAddressForbiddenError(hostname, a.address, reason), '', 0);
          return;
        }
      }
      const wanted = options.family === 4 || options.family === 6 ? found.filter((a) => a.family === options.family) : found;
      if (wanted.length === 0) {
        const e: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
        e.code = 'ENOTFOUND';
        callback(e, '', 0);
        return;
      }
      if (options.all === true) callback(null, wanted);
      else callback(null, wanted[0]!.address, wanted[0]!.family);
    };
    if (resolve) {
      resolve(hostname).then(
        (addresses) =>
          done(
            null,
            addresses.map((address) => ({ address, family: familyOf(address) })),
          ),
        (e: unknown) => done(e instanceof Error ? e : new Error(String(e)), []),
      );
      return;
    }
    const opts: LookupAllOptions = { all: true, ...(options.family !== undefined ? { family: options.family } : {}), ...(options.hints !== undefined ? { hints: options.hints } : {}) };
    dnsLookup(hostname, opts, (err, addresses) => done(err, err ? [] : addresses));
  };
}

/**
 * An undici `Agent` (keep-alive pooled) that only ever connects to allowed upstream addresses.
 * Use it as the `dispatcher` of every request to a merchant upstream; it does not follow redirects (undici's
 * default), and if a caller does, each hop's connection goes through the same check.
 */
export function guardedDispatcher(allowlist: UpstreamAllowlist | readonly string[], options: GuardedDispatcherOptions = {}): Agent {
  const list = toAllowlist(allowlist);
  const base = buildConnector({ timeout: options.connectTimeoutMs ?? 10_000, lookup: guardedLookup(list, options.resolve) });
  const connect: buildConnector.connector = (opts, callback) => {
    const host = stripBrackets(opts.hostname);
    const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
    if (isIP(host) !== 0) {
      // Node connects to an IP-literal host without calling `lookup`: check it here.
      const reason = addressVerdict(list, host, host, port);
      if (reason !== undefined) {
        callback(new UpstreamAddressForbiddenError(host, host, reason), null);
        return;
      }
    }
    base(opts, (err, socket) => {
      if (err !== null) {
        callback(err, null);
        return;
      }
      // Belt and braces: the peer the socket actually reached.
      const peer = (socket as Socket).remoteAddress;
      const reason = peer === undefined ? 'unknown peer address' : addressVerdict(list, host, peer, port);
      if (reason !== undefined) {
        socket.destroy();
        callback(new UpstreamAddressForbiddenError(host, peer ?? '?', reason), null);
        return;
      }
      callback(null, socket);
    });
  };
  return new Agent({
    connect,
    connections: options.connectionsPerOrigin ?? 32,
    headersTimeout: options.headersTimeoutMs ?? 30_000,
    bodyTimeout: options.bodyTimeoutMs ?? 30_000,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 4_000,
    keepAliveMaxTimeout: options.keepAliveMaxTimeoutMs ?? 60_000,
    ...(options.maxResponseBytes !== undefined ? { maxResponseSize: options.maxResponseBytes } : {}),
  });
}
