/**
 * The guard's decision, taken before anyone pays: an upstream this gateway's connector would refuse (a forbidden
 * address not allowlisted, see `guard.ts`) is refused like an open breaker, with nothing charged and the upstream
 * never called, instead of settling the payment and then failing to connect (a 502 after the buyer paid).
 *
 * The same policy as the connector, on the same inputs: an IP-literal host is judged at once; a host name by its
 * DNS answer, kept {@link PREFLIGHT_TTL_MS} per host and port (a refusal too), at most {@link PREFLIGHT_MAX} of them.
 * A name that does not resolve is refused too (the call could not connect). The connector still checks every
 * connection (DNS rebinding): this is the early answer, not the guard.
 */
import { isIP } from 'node:net';
import { LRUCache } from 'lru-cache';
import { forbiddenAddressReason } from './ip-ranges.ts';
import { systemResolver, UpstreamAllowlist, urlPort, type Resolver } from './guard.ts';

/** How long a host's verdict is kept. */
export const PREFLIGHT_TTL_MS = 10_000;
/** Hosts whose verdict is kept at most. */
export const PREFLIGHT_MAX = 1000;

/** Why the guard would refuse, safe to answer (it names no address). */
export const GUARD_REFUSAL = 'its upstream is not reachable from this gateway';

export interface PreflightOptions {
  resolve?: Resolver;
  resolveTimeoutMs?: number;
}

export class UpstreamPreflight {
  readonly #allowlist: UpstreamAllowlist;
  readonly #resolve: Resolver;
  readonly #resolveTimeoutMs: number;
  readonly #verdicts = new LRUCache<string, { refused: boolean }>({ max: PREFLIGHT_MAX, ttl: PREFLIGHT_TTL_MS });
  readonly #pending = new Map<string, Promise<boolean>>();
  /**
   * Verdicts that depend on the URL alone (an allowlisted host, an IP literal), by URL: a merchant's base URL is
   * judged once, not parsed again for every request (the unpaid 402 asks too).
   */
  readonly #byUrl = new LRUCache<string, { refused: boolean }>({ max: PREFLIGHT_MAX });

  constructor(allowlist: UpstreamAllowlist | readonly string[], opts: PreflightOptions = {}) {
    this.#allowlist = allowlist instanceof UpstreamAllowlist ? allowlist : new UpstreamAllowlist(allowlist);
    this.#resolve = opts.resolve ?? systemResolver;
    this.#resolveTimeoutMs = opts.resolveTimeoutMs ?? 2000;
  }

  /**
   * Whether the guard would refuse to connect to `url`'s origin: at once when known (an IP literal, an allowlisted
   * host, a verdict kept), else once its host has been resolved.
   */
  refuses(url: string): boolean | Promise<boolean> {
    const known = this.#byUrl.get(url);
    if (known) return known.refused;
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return true;
    }
    const host = parsed.hostname.startsWith('[') ? parsed.hostname.slice(1, -1) : parsed.hostname;
    const port = urlPort(parsed);
    if (this.#allowlist.allowsHost(host, port)) return this.#judged(url, false);
    if (isIP(host) !== 0) return this.#judged(url, this.#refusesAddress(host, port));
    const key = `${host}:${port}`;
    const kept = this.#verdicts.get(key);
    if (kept) return kept.refused;
    let pending = this.#pending.get(key);
    if (!pending) {
      pending = this.#lookup(host, port)
        .then((refused) => {
          this.#verdicts.set(key, { refused });
          return refused;
        })
        .finally(() => this.#pending.delete(key));
      this.#pending.set(key, pending);
    }
    return pending;
  }

  /** The verdict when it is known now, else `false` (and a lookup started): for the answer before the 402. */
  refusesNow(url: string): boolean {
    const verdict = this.refuses(url);
    if (typeof verdict === 'boolean') return verdict;
    verdict.catch(() => {});
    return false;
  }

  #judged(url: string, refused: boolean): boolean {
    this.#byUrl.set(url, { refused });
    return refused;
  }

  #refusesAddress(address: string, port: number): boolean {
    return !this.#allowlist.allowsAddress(address, port) && forbiddenAddressReason(address) !== undefined;
  }

  async #lookup(host: string, port: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const addresses = await Promise.race([
        this.#resolve(host),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('timed out')), this.#resolveTimeoutMs);
        }),
      ]);
      return addresses.length === 0 || addresses.some((a) => this.#refusesAddress(a, port));
    } catch {
      return true;
    } finally {
      clearTimeout(timer);
    }
  }
}
