import type { Logger } from '../log/logger.ts';
import type { LeaseToken } from '../store/fence.ts';

/**
 * A role one node of a cluster plays at a time (the stock desk, the channel claimer): the node holding the role's
 * lease runs it, the others stand by, trying to take the lease on every tick. When its holder dies (or stops), the
 * lease is not renewed and expires, by the database's clock; the first standby to take it then starts the role, which
 * resumes the dead holder's work from its durable records exactly as a restart of the dead node would.
 *
 * The lease is renewed (and, while free, taken) every third of its term. A holder that finds it taken away, or
 * cannot renew it for most of a term, has lost it: `onLost` stops the role at once. While held, {@link fence} is the
 * lease at the epoch it was granted (writes that carry it commit only while it is live at that epoch, see
 * `store/fence.ts`) and {@link signing} says whether the role may sign and send now.
 */

/** What the lease is taken and kept through: this node's leases (`store/postgres/leases.ts`), on a pool of their own. */
export interface RoleLeases {
  /**
   * Takes `name` if it is free, expired or this run's already (then it is extended by a term: the renewal of this
   * lease alone, leaving the node's other leases to its membership); one statement, so of many takers one gets it.
   * Answers the epoch of this holder's grant when taken.
   */
  take(name: string): Promise<{ ok: true; value: { epoch: number } } | { ok: false; error?: { expiresInMs: number } }>;
  release(names: readonly string[]): Promise<void>;
}

export interface RoleLeaseOptions {
  leases: RoleLeases;
  /** The lease's name. */
  name: string;
  /** The lease's term (ms), the cluster's (GATE402_LEASE_MS). */
  termMs: number;
  /** This node took the lease: start the role. A failure gives the lease back (another node, or the next tick, tries). */
  activate(): Promise<void>;
  /** After each renewal while the role runs here. */
  renewed?(): Promise<void>;
  /** After each try at a lease another node holds (`live`: it held it, unexpired, by the database's clock). */
  standingBy?(live: boolean): Promise<void>;
  /** The lease was lost while held: the role must stop signing now. */
  onLost(why: string): void;
  log: Logger;
}

export class RoleLease {
  readonly #o: RoleLeaseOptions;
  /** What the role is called in the log ("the stock desk"). */
  readonly #role: string;
  /** This run holds the lease (its role is starting or running). */
  #held = false;
  /** The role started here and runs. */
  #active = false;
  #epoch: number | undefined;
  #activating: Promise<void> | undefined;
  #renewedAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #tick: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(role: string, opts: RoleLeaseOptions) {
    this.#role = role;
    this.#o = opts;
  }

  /** Tries the lease once now (the first node's start takes it at once when it is free), then on every tick. */
  async start(): Promise<void> {
    await this.#run();
  }

  /** Whether this node runs the role now. */
  get active(): boolean {
    return this.#active;
  }

  get held(): boolean {
    return this.#held;
  }

  /** The lease as granted to this node, while held (what its fenced writes carry); undefined otherwise. */
  fence = (): LeaseToken | undefined => (this.#held && this.#epoch !== undefined ? { name: this.#o.name, epoch: this.#epoch } : undefined);

  /**
   * Why the role must not sign or send now, or undefined: the lease is not held, or most of a term has passed since
   * its last renewal by this process's own clock (a paused process learns it only here: I/O may run before timers).
   */
  signing = (): string | undefined => {
    if (!this.#held) return `fenced: the ${this.#role} lease ${this.#o.name} is not held here`;
    if (performance.now() - this.#renewedAt > this.#o.termMs * 0.8) return `fenced: the ${this.#role} lease ${this.#o.name} was not renewed for most of a term`;
    return undefined;
  };

  /** Resolves once a role this node is starting has started (or failed to). */
  async settled(): Promise<void> {
    await this.#activating;
  }

  /** One try at a time: a take never overlaps another (one would start the role twice). */
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
        if (this.#stopped) return;
        if (!taken.ok) return await this.#o.standingBy?.((taken.error?.expiresInMs ?? 0) > 0);
        this.#held = true;
        this.#epoch = taken.value.epoch;
        this.#renewedAt = started;
        log.warn(`took the ${this.#role} lease: this node runs it now`, { lease: name, epoch: taken.value.epoch });
        // Started beside the renewals: resuming much work may take longer than a term.
        this.#activating = this.#activate();
        return;
      }
      const renewed = await leases.take(name);
      if (!renewed.ok) return this.#lose(`the ${this.#role} lease was taken by another node`);
      this.#renewedAt = started;
      if (this.#active) await this.#o.renewed?.();
    } catch (error) {
      if (this.#held && performance.now() - this.#renewedAt > this.#o.termMs * 0.8) return this.#lose(`could not renew the ${this.#role} lease: ${(error as Error).message}`);
      log.warn(this.#held ? `could not renew the ${this.#role} lease; trying again` : `could not read the ${this.#role} lease; trying again`, { error });
    }
  }

  async #activate(): Promise<void> {
    try {
      await this.#o.activate();
      if (this.#held && !this.#stopped) this.#active = true;
    } catch (error) {
      this.#o.log.error(`could not start the ${this.#role}; its lease is given back`, { error });
      this.#held = false;
      await this.#o.leases.release([this.#o.name]).catch(() => {});
    }
  }

  #lose(why: string): void {
    if (!this.#held) return;
    this.#held = false;
    this.#active = false;
    this.#o.log.error(`fenced: this node lost the ${this.#role} lease and stops signing for it`, { why, lease: this.#o.name });
    this.#o.onLost(why);
  }

  /** Stops taking and renewing; `release` (once the role stopped) gives the lease back for a standby to take at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#tick.catch(() => {});
  }

  async release(): Promise<void> {
    if (!this.#held) return;
    this.#held = false;
    this.#active = false;
    await this.#o.leases.release([this.#o.name]).catch((error: unknown) => this.#o.log.warn(`could not give the ${this.#role} lease back; it expires by itself`, { error }));
  }
}
