import type { Logger } from '../log/logger.ts';

/**
 * The stock desk in a cluster: one key, so one node signs with it at a time, the one holding the desk lease. Every
 * node has a desk and serves the stock API (quotes and 402s from the shared market, buys placed through the store,
 * see `order-desk.ts`); the others stand by, trying to take the lease on every tick. When its holder dies (or stops),
 * the lease is not renewed and expires, by the database's clock; the first standby to take it then starts its desk,
 * which resumes every unfinished order and gas sponsorship from their durable records exactly as a restart of the
 * dead node would: a signed swap, refund or transfer is re-sent as it was and awaited, never signed anew.
 *
 * The lease is renewed (and, while free, taken) every third of its term. A holder that finds it taken away, or
 * cannot renew it for most of a term, has lost it: `onLost` stops the desk at once (the command line exits, as for
 * the node's other leases, see `cluster/membership.ts`).
 */

/** What the lease is taken and kept through: this node's leases (`store/postgres/leases.ts`), on a pool of their own. */
export interface DeskLeases {
  /**
   * Takes `name` if it is free, expired or this run's already (then it is extended by a term: the renewal of this
   * lease alone, leaving the node's other leases to its membership); one statement, so of many takers one gets it.
   */
  take(name: string): Promise<{ ok: boolean }>;
  release(names: readonly string[]): Promise<void>;
}

export interface DeskLeaseOptions {
  leases: DeskLeases;
  /** The lease's name (`desk:<address>`). */
  name: string;
  /** The lease's term (ms), the cluster's (GATE402_LEASE_MS). */
  termMs: number;
  /** This node took the lease: start the desk. A failure gives the lease back (another node, or the next tick, tries). */
  activate(): Promise<void>;
  /** After each renewal while the desk runs here (the inbox sweep). */
  renewed?(): Promise<void>;
  /** The lease was lost while held: the desk must stop signing now. */
  onLost(why: string): void;
  log: Logger;
}

export class DeskLease {
  readonly #o: DeskLeaseOptions;
  /** This run holds the lease (its desk is starting or running). */
  #held = false;
  /** The desk started here and runs. */
  #active = false;
  #activating: Promise<void> | undefined;
  #renewedAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #tick: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(opts: DeskLeaseOptions) {
    this.#o = opts;
  }

  /** Tries the lease once now (a desk node's start takes it at once when it is free), then on every tick. */
  async start(): Promise<void> {
    await this.#run();
  }

  /** Whether this node runs the desk now. */
  get active(): boolean {
    return this.#active;
  }

  get held(): boolean {
    return this.#held;
  }

  /**
   * Why the desk must not sign or send now, or undefined: the lease is not held, or most of a term has passed since
   * its last renewal by this process's own clock (a paused process learns it only here: I/O may run before timers).
   */
  signing(): string | undefined {
    if (!this.#held) return `fenced: the stock desk lease ${this.#o.name} is not held here`;
    if (performance.now() - this.#renewedAt > this.#o.termMs * 0.8) return `fenced: the stock desk lease ${this.#o.name} was not renewed for most of a term`;
    return undefined;
  }

  /** Resolves once a desk this node is starting has started (or failed to). */
  async settled(): Promise<void> {
    await this.#activating;
  }

  /** One try at a time: a take never overlaps another (one would start the desk twice). */
  #run(): Promise<void> {
    this.#tick = this.#tick.then(() => this.#once()).finally(() => this.#schedule());
    return this.#tick;
  }

  #schedule(): void {
    clearTimeout(this.#timer);
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#run(), Math.max(50, Math.floor(this.#o.termMs / 3)));
    this.#timer.unref();
  }

  async #once(): Promise<void> {
    if (this.#stopped) return;
    const { leases, name, log } = this.#o;
    const started = performance.now();
    try {
      if (!this.#held) {
        const taken = await leases.take(name);
        if (!taken.ok || this.#stopped) return;
        this.#held = true;
        this.#renewedAt = started;
        log.warn('took the stock desk lease: this node runs the desk now', { lease: name });
        // Started beside the renewals: resuming many orders may take longer than a term.
        this.#activating = this.#activate();
        return;
      }
      const renewed = await leases.take(name);
      if (!renewed.ok) return this.#lose('the stock desk lease was taken by another node');
      this.#renewedAt = started;
      if (this.#active) await this.#o.renewed?.();
    } catch (error) {
      if (this.#held && performance.now() - this.#renewedAt > this.#o.termMs * 0.8) return this.#lose(`could not renew the stock desk lease: ${(error as Error).message}`);
      log.warn(this.#held ? 'could not renew the stock desk lease; trying again' : 'could not read the stock desk lease; trying again', { error });
    }
  }

  async #activate(): Promise<void> {
    try {
      await this.#o.activate();
      if (this.#held && !this.#stopped) this.#active = true;
    } catch (error) {
      this.#o.log.error('could not start the stock desk; its lease is given back', { error });
      this.#held = false;
      await this.#o.leases.release([this.#o.name]).catch(() => {});
    }
  }

  #lose(why: string): void {
    if (!this.#held) return;
    this.#held = false;
    this.#active = false;
    this.#o.log.error('this node lost the stock desk lease: its desk stops signing', { why });
    this.#o.onLost(why);
  }

  /** Stops taking and renewing; `release` (once the desk stopped) gives the lease back for a standby to take at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#tick.catch(() => {});
  }

  async release(): Promise<void> {
    if (!this.#held) return;
    this.#held = false;
    this.#active = false;
    await this.#o.leases.release([this.#o.name]).catch((error: unknown) => this.#o.log.warn('could not give the stock desk lease back; it expires by itself', { error }));
  }
}
