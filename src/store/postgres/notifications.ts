import pg from 'pg';
import type { Logger } from '../../log/logger.ts';
import type { Queryable } from './leases.ts';

/**
 * Changes told between the nodes of a cluster with PostgreSQL's LISTEN/NOTIFY: a node that wrote a record another
 * node keeps in memory (a merchant) notifies its channel; every node's listener hears it within a round trip.
 *
 * The listener has a connection of its own. Notifications sent while it is down are lost, so when the connection is
 * lost (an error, the server restarting, or a liveness query that goes unanswered) it connects again, with a bounded
 * backoff, and then tells every subscriber to reload everything (`resync`): nothing heard is ever the only way a
 * change arrives.
 */
export interface Subscriber {
  /** A change named by its payload (a merchant's slug). */
  changed(payload: string): void;
  /** Notifications may have been missed (the listener was reconnected): forget or reload everything. */
  resync(): void;
}

export interface ListenerOptions {
  url: string;
  log: Logger;
  /** Bounds the connect and every query of the listener (ms). */
  timeoutMs: number;
  /** How often the listener's connection is checked with a query (ms); a failed check reconnects it. */
  checkMs?: number;
  /** Longest wait between two reconnection attempts (ms). */
  maxBackoffMs?: number;
}

/** How the listener's connection names itself to the server (`pg_stat_activity`). */
export const LISTENER_APPLICATION = 'gate402 listener';

/** Channel names are identifiers: ours are fixed, lower case. */
const CHANNEL = /^[a-z][a-z0-9_]{0,62}$/;

/** Payloads are at most 8000 bytes in PostgreSQL; a change is named, not carried. */
const MAX_PAYLOAD_BYTES = 7900;

/** Tells every node listening on `channel` that `payload` changed (after the write is committed). */
export async function notify(db: Queryable, channel: string, payload: string, timeoutMs: number): Promise<void> {
  if (!CHANNEL.test(channel)) throw new Error(`not a channel name: ${channel}`);
  if (Buffer.byteLength(payload) > MAX_PAYLOAD_BYTES) throw new Error(`notification payload over ${MAX_PAYLOAD_BYTES} bytes`);
  await db.query({ text: 'SELECT pg_notify($1, $2)', values: [channel, payload], query_timeout: timeoutMs } as pg.QueryConfig);
}

export class ChangeListener {
  readonly #o: ListenerOptions;
  readonly #subscribers = new Map<string, Set<Subscriber>>();
  #client: pg.Client | undefined;
  /** The channels each connection listens on. */
  readonly #listening = new WeakMap<pg.Client, Set<string>>();
  #connecting: Promise<void> | undefined;
  #check: NodeJS.Timeout | undefined;
  #retry: NodeJS.Timeout | undefined;
  #backoffMs = 0;
  #stopped = false;
  /** Connections made so far (the first, then one per reconnection). */
  connections = 0;

  constructor(opts: ListenerOptions) {
    this.#o = opts;
  }

  /** Connects and listens; resolves once the first connection listens on every channel subscribed so far. */
  async start(): Promise<void> {
    await this.#connect();
    const checkMs = this.#o.checkMs ?? 5000;
    this.#check = setInterval(() => void this.#probe(), checkMs);
    this.#check.unref();
  }

  /**
   * Hears `channel` from now on (on this connection and every later one). Resolves once the live connection listens
   * on it; when none is live (a reconnection under way), the channel is listened on by the next connection before
   * that connection counts as live, and its subscribers are told to `resync` then: nothing is missed either way.
   */
  async subscribe(channel: string, subscriber: Subscriber): Promise<void> {
    if (!CHANNEL.test(channel)) throw new Error(`not a channel name: ${channel}`);
    let set = this.#subscribers.get(channel);
    if (set) {
      set.add(subscriber);
      return;
    }
    set = new Set([subscriber]);
    this.#subscribers.set(channel, set);
    // A connection being made may have sent its LISTENs already: it listens on this one too before it is live.
    const connecting = this.#connecting;
    if (connecting) await connecting.catch(() => {});
    const client = this.#client;
    if (!client || this.#listening.get(client)?.has(channel)) return;
    try {
      await this.#listen(client, channel);
    } catch (error) {
      // Not listening on the live connection: it is dropped, and the next one listens on every channel, then resyncs.
      this.#lost(client, error);
    }
  }

  async #listen(client: pg.Client, channel: string): Promise<void> {
    await client.query({ text: `LISTEN ${channel}`, query_timeout: this.#o.timeoutMs } as pg.QueryConfig);
    let listening = this.#listening.get(client);
    if (!listening) {
      listening = new Set();
      this.#listening.set(client, listening);
    }
    listening.add(channel);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#check);
    clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => {});
  }

  #connect(): Promise<void> {
    this.#connecting ??= (async () => {
      const client = new pg.Client({ connectionString: this.#o.url, connectionTimeoutMillis: this.#o.timeoutMs, keepAlive: true, application_name: LISTENER_APPLICATION });
      client.on('error', (error) => this.#lost(client, error));
      client.on('end', () => this.#lost(client, new Error('connection ended')));
      client.on('notification', (n) => {
        for (const s of this.#subscribers.get(n.channel) ?? []) s.changed(n.payload ?? '');
      });
      try {
        await client.connect();
        // Until every channel subscribed so far is listened on (one subscribed meanwhile included).
        for (;;) {
          const missing = [...this.#subscribers.keys()].filter((c) => !this.#listening.get(client)?.has(c));
          if (missing.length === 0) break;
          for (const channel of missing) await this.#listen(client, channel);
        }
      } catch (error) {
        client.removeAllListeners('end');
        await client.end().catch(() => {});
        throw error;
      }
      if (this.#stopped) {
        await client.end().catch(() => {});
        return;
      }
      this.#client = client;
      this.#backoffMs = 0;
      this.connections += 1;
    })().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  /** A query on the listener's connection: one that fails or goes unanswered means notifications may be lost. */
  async #probe(): Promise<void> {
    const client = this.#client;
    if (!client) return;
    try {
      await client.query({ text: 'SELECT 1', query_timeout: this.#o.timeoutMs } as pg.QueryConfig);
    } catch (error) {
      this.#lost(client, error);
    }
  }

  #lost(client: pg.Client, error: unknown): void {
    if (this.#stopped || this.#client !== client) return;
    this.#client = undefined;
    client.removeAllListeners('end');
    client.end().catch(() => {});
    this.#o.log.warn('lost the connection that listens for changes: reconnecting, then reloading', { error });
    this.#reconnect();
  }

  #reconnect(): void {
    if (this.#stopped) return;
    this.#connect().then(
      () => {
        if (this.#stopped) return;
        this.#o.log.info('listening for changes again: reloading everything');
        for (const set of this.#subscribers.values()) for (const s of set) s.resync();
      },
      (error: unknown) => {
        this.#backoffMs = Math.min(this.#o.maxBackoffMs ?? 2000, Math.max(100, this.#backoffMs * 2));
        this.#o.log.warn('could not listen for changes yet', { retryInMs: this.#backoffMs, error });
        this.#retry = setTimeout(() => this.#reconnect(), this.#backoffMs);
        this.#retry.unref();
      },
    );
  }
}
