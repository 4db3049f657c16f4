/**
 * The live gas price of each chain, read at most once per `maxAgeMs` per chain (concurrent askers share one read),
 * each read bounded by `timeoutMs`. A read that fails or times out never throws at the asker: the last price read
 * is kept and answered (stale), and a chain never read answers undefined; a failing chain is asked again only once
 * `maxAgeMs` has passed, so an RPC outage costs each asker at most one timeout per period. What reads the chain is
 * passed in.
 */
import { publicClientFor, type RpcObserver } from './clients.ts';
import type { NetworkRegistry } from './networks.ts';

export interface GasPriceReading {
  /** Wei per gas, as the chain's `eth_gasPrice` answered; undefined while the chain was never read. */
  wei: bigint | undefined;
  /** Whether `wei` is older than `maxAgeMs` because the last read failed. */
  stale: boolean;
}

export interface GasPriceCacheOptions {
  /** One read of `caip2`'s gas price (e.g. viem's `getGasPrice`); may throw. */
  read(caip2: string, signal: AbortSignal): Promise<bigint>;
  maxAgeMs: number;
  timeoutMs: number;
  now?: () => number;
  /** Told of each failed read (for metrics and logs). */
  failed?(caip2: string, error: unknown): void;
}

interface Entry {
  wei?: bigint;
  /** When `wei` was read. */
  at: number;
  /** When the chain was last asked, answered or not: a failing chain is asked again only after `maxAgeMs`. */
  asked: number;
  reading?: Promise<void>;
}

export class GasPriceCache {
  readonly #o: GasPriceCacheOptions;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();

  constructor(opts: GasPriceCacheOptions) {
    this.#o = opts;
    this.#now = opts.now ?? Date.now;
  }

  /** The price of `caip2`: the cached one while fresh, else after one bounded read (the last known one if it fails). */
  async price(caip2: string): Promise<GasPriceReading> {
    let entry = this.#entries.get(caip2);
    if (!entry) {
      entry = { at: Number.NEGATIVE_INFINITY, asked: Number.NEGATIVE_INFINITY };
      this.#entries.set(caip2, entry);
    }
    if (entry.reading === undefined && this.#now() - entry.asked >= this.#o.maxAgeMs) {
      const read = entry;
      read.reading = this.#refresh(caip2, read).finally(() => {
        read.reading = undefined;
      });
    }
    // A read in flight is waited for by every asker (it is bounded by the timeout).
    if (entry.reading) await entry.reading;
    return { wei: entry.wei, stale: this.#now() - entry.at >= this.#o.maxAgeMs };
  }

  /** The last price read of `caip2`, without asking the chain. */
  lastKnown(caip2: string): bigint | undefined {
    return this.#entries.get(caip2)?.wei;
  }

  async #refresh(caip2: string, entry: Entry): Promise<void> {
    entry.asked = this.#now();
    const abort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        abort.abort();
        reject(new Error(`gas price read timed out after ${this.#o.timeoutMs} ms`));
      }, this.#o.timeoutMs);
    });
    try {
      const wei = await Promise.race([this.#o.read(caip2, abort.signal), timeout]);
      if (typeof wei !== 'bigint' || wei < 0n) throw new Error(`the chain answered a gas price of ${String(wei)}`);
      entry.wei = wei;
      entry.at = this.#now();
    } catch (error) {
      this.#o.failed?.(caip2, error);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Reads each network's `eth_gasPrice` through a client of its own (bounded by `timeoutMs`, observed for metrics). */
export function gasPriceReader(networks: NetworkRegistry, opts: { timeoutMs: number; observe?: (caip2: string) => RpcObserver }): GasPriceCacheOptions['read'] {
  const clients = new Map(networks.all().map((n) => [n.caip2, publicClientFor(n.chainId, n.rpcUrl, { timeoutMs: opts.timeoutMs, ...(opts.observe ? { observe: opts.observe(n.caip2) } : {}) })]));
  return async (caip2) => {
    const client = clients.get(caip2);
    if (!client) throw new Error(`network ${caip2} is not configured`);
    return client.getGasPrice();
  };
}
