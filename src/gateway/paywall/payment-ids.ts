import { createHash, randomUUID } from 'node:crypto';
import type { VerifyRequest } from '../../protocol/x402/types.ts';
import type { DurableCollection } from '../../store/durable-collection.ts';
import type { NonceClaims } from '../../store/nonce-claims.ts';

/**
 * Idempotency keys (the x402 `payment-identifier` extension), durably, in the store's claims and collections (so they
 * hold across restarts, and across the nodes of a cluster sharing one store).
 *
 * A key (payer and id) is bound to the first payment that came with it: its claim is taken atomically with the
 * binding's record, so of any number of concurrent first requests exactly one binds. Every later request with the key
 * and the same fingerprint (same route, method, path, query, body and accepted terms) runs on the bound payment, never
 * on its own: settling it again is answered from the engine's record, and its upstream call is guarded by the served
 * claims, so a key never buys two settlements nor two upstream calls. Once an answer is served it is recorded (up to
 * `maxBodyBytes` of body) and replayed to every later request with the key, until `retentionMs` have passed.
 *
 * The claim's holder says where the key stands:
 *  - `lease <untilMs> <uuid>`: a request is running on the bound payment until `untilMs` (then anyone may take over:
 *    the node holding it died);
 *  - `open`: the bound payment was charged but not served (pending, or the upstream failed): the next request runs on it;
 *  - `done`: the answer is recorded.
 */
export interface PaymentIdStore {
  claims: NonceClaims;
  /** Key -> the binding and, once served, the answer. */
  records: DurableCollection<PaymentIdRecord>;
  /** `{at, 15 digits}-{key}` -> key: the bindings in the order they were made, for expiry. */
  expiry: DurableCollection<string>;
}

export interface PaymentIdPolicy {
  /** The largest answer body recorded; a larger answer is served once and its key then answers 410. */
  maxBodyBytes: number;
  /** How long a key is kept after it was first used; after that it is forgotten (a later use is a new payment). */
  retentionMs: number;
  /** How long a running request holds its key before another node may take it over. */
  leaseMs: number;
  /** How long a request waits for another one running on its key, before answering 409 (retryable). */
  waitMs: number;
  /** At most this many requests wait at once; more answer 409 at once. */
  maxWaiting: number;
}

/** An answer as recorded: the status, the headers that were sent, the body (base64) unless it was over the cap. */
export interface RecordedAnswer {
  status: number;
  headers: Record<string, string>;
  /** Base64; absent when the body was larger than the cap. */
  body?: string;
  bodyBytes: number;
}

export interface PaymentIdRecord {
  fingerprint: string;
  /** The bound payment: every request with this key runs on it. */
  request: VerifyRequest;
  at: number;
  answer?: RecordedAnswer;
}

/** What a request with a key does. */
export type PaymentIdTurn =
  /** Run the paid flow on `request` (the bound payment), holding the key: report the outcome with `finish`. */
  | { kind: 'run'; request: VerifyRequest; finish: (outcome: RunOutcome) => Promise<void>; record: (answer: RecordedAnswer) => Promise<void> }
  /** The key's answer, recorded. */
  | { kind: 'replay'; answer: RecordedAnswer; bound: VerifyRequest }
  /** The key is bound to another request (409), still running elsewhere (409, retryable), or its answer was not kept (410). */
  | { kind: 'conflict'; message: string }
  | { kind: 'busy'; message: string }
  | { kind: 'gone'; message: string };

/** How a run on the bound payment ended: served (its answer recorded first), charged but not served, or not charged. */
export type RunOutcome = 'served' | 'charged' | 'not-charged';

const DONE = 'done';
const OPEN = 'open';
const lease = (untilMs: number) => `lease ${untilMs} ${randomUUID()}`;
const leaseExpired = (holder: string, nowMs: number) => {
  const until = Number(holder.split(' ')[1]);
  return !Number.isFinite(until) || until <= nowMs;
};

/** What identifies "the same payload": the request bought and the terms paid, not the signature or its nonce. */
export function paymentIdFingerprint(parts: {
  merchant: string;
  route: string;
  method: string;
  path: string;
  query: string;
  body: Uint8Array | undefined;
  accepted: VerifyRequest['paymentRequirements'];
}): string {
  const a = parts.accepted;
  const body = parts.body && parts.body.length > 0 ? createHash('sha256').update(parts.body).digest('hex') : '';
  const material = JSON.stringify([parts.merchant, parts.route, parts.method, parts.path, parts.query, body, a.scheme, a.network, a.asset.toLowerCase(), a.payTo.toLowerCase(), a.amount]);
  return createHash('sha256').update(material).digest('hex');
}

/** The store key of a payer's id: ids are the payer's own, so one payer's id never collides with another's. */
export const paymentIdKey = (payer: string, id: string) => `${payer.toLowerCase()}:${id}`;

export function encodeAnswer(status: number, headers: Record<string, string>, body: string | Uint8Array | undefined, maxBodyBytes: number): RecordedAnswer {
  const bytes = body === undefined ? new Uint8Array(0) : typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return { status, headers: { ...headers }, bodyBytes: bytes.length, ...(bytes.length <= maxBodyBytes ? { body: Buffer.from(bytes).toString('base64') } : {}) };
}

export class PaymentIds {
  readonly #store: PaymentIdStore;
  readonly #policy: PaymentIdPolicy;
  readonly #now: () => number;
  #waiting = 0;

  constructor(store: PaymentIdStore, policy: PaymentIdPolicy, now: () => number) {
    this.#store = store;
    this.#policy = policy;
    this.#now = now;
  }

  get policy(): Readonly<PaymentIdPolicy> {
    return this.#policy;
  }

  /** Decides what a request with `key` does: run (binding `request` if the key is new), replay, or refuse. */
  async turn(key: string, fingerprint: string, request: VerifyRequest): Promise<PaymentIdTurn> {
    const deadline = this.#now() + this.#policy.waitMs;
    let waited = false;
    try {
      for (;;) {
        const decided = await this.#try(key, fingerprint, request);
        if (decided !== 'wait') return decided;
        if (this.#now() >= deadline || (!waited && this.#waiting >= this.#policy.maxWaiting)) {
          return { kind: 'busy', message: 'another request with this payment identifier is being served; retry shortly (you will not be charged twice)' };
        }
        if (!waited) {
          waited = true;
          this.#waiting++;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      if (waited) this.#waiting--;
    }
  }

  async #try(key: string, fingerprint: string, request: VerifyRequest): Promise<PaymentIdTurn | 'wait'> {
    const now = this.#now();
    const mine = lease(now + this.#policy.leaseMs);
    const holder = await this.#store.claims.holder(key);
    let record = await this.#store.records.get(key);
    if (record !== undefined && record.at + this.#policy.retentionMs <= now) {
      await this.#forget(key, record);
      return this.#try(key, fingerprint, request);
    }
    if (holder === undefined) {
      const fresh: PaymentIdRecord = { fingerprint, request, at: now };
      const won = await this.#store.claims.claim(key, mine, () => {
        this.#store.records.putWithin(key, fresh);
        this.#store.expiry.putWithin(expiryKey(now, key), key);
      });
      return won.claimed ? this.#run(key, mine, fresh) : this.#try(key, fingerprint, request);
    }
    record = await this.#store.records.get(key);
    if (record === undefined) {
      // A key claimed but not bound: only a crash between forgetting a record and releasing its claim leaves one.
      if (holder.startsWith('lease ') && !leaseExpired(holder, now)) return 'wait';
      const fresh: PaymentIdRecord = { fingerprint, request, at: now };
      if (!(await this.#store.claims.takeover(key, holder, mine))) return this.#try(key, fingerprint, request);
      await this.#store.records.put(key, fresh);
      await this.#store.expiry.put(expiryKey(now, key), key);
      return this.#run(key, mine, fresh);
    }
    if (record.fingerprint !== fingerprint) {
      return { kind: 'conflict', message: 'this payment identifier was used for a different request or different payment terms; use a new identifier' };
    }
    if (record.answer !== undefined) {
      if (record.answer.body === undefined) {
        return {
          kind: 'gone',
          message: `the answer to this payment identifier was served once and, at ${record.answer.bodyBytes} bytes (over ${this.#policy.maxBodyBytes}), not kept; it is not charged again`,
        };
      }
      return { kind: 'replay', answer: record.answer, bound: record.request };
    }
    if (holder === DONE) return { kind: 'conflict', message: 'this payment identifier was used and its answer is not kept' };
    if (holder.startsWith('lease ') && !leaseExpired(holder, now)) return 'wait';
    if (!(await this.#store.claims.takeover(key, holder, mine))) return this.#try(key, fingerprint, request);
    return this.#run(key, mine, record);
  }

  #run(key: string, holder: string, record: PaymentIdRecord): PaymentIdTurn {
    return {
      kind: 'run',
      request: record.request,
      record: async (answer) => {
        await this.#store.records.put(key, { ...record, answer });
      },
      finish: async (outcome) => {
        if (outcome === 'served') {
          // Served: the key is spent, its answer replayed if it could be recorded (`done` without one answers 409).
          await this.#store.claims.takeover(key, holder, DONE);
        } else if (outcome === 'not-charged') {
          // Nothing was bought with the bound payment: the key is free for another one.
          await this.#store.records.remove(key);
          await this.#store.expiry.remove(expiryKey(record.at, key));
          await this.#store.claims.release(key, holder);
        } else {
          await this.#store.claims.takeover(key, holder, OPEN);
        }
      },
    };
  }

  async #forget(key: string, record: PaymentIdRecord): Promise<void> {
    await this.#store.records.remove(key);
    await this.#store.expiry.remove(expiryKey(record.at, key));
    const holder = await this.#store.claims.holder(key);
    if (holder !== undefined) await this.#store.claims.release(key, holder);
  }

  /** Forgets keys older than the retention, oldest first, at most `max` of them; returns how many. */
  async sweep(max = 1000): Promise<number> {
    const cutoff = this.#now() - this.#policy.retentionMs;
    const old: Array<[string, string]> = [];
    for await (const [k, key] of this.#store.expiry.entries()) {
      if (Number(k.slice(0, 15)) > cutoff || old.length >= max) break;
      old.push([k, key]);
    }
    for (const [k, key] of old) {
      const record = await this.#store.records.get(key);
      if (record !== undefined && record.at + this.#policy.retentionMs <= this.#now()) await this.#forget(key, record);
      else await this.#store.expiry.remove(k);
    }
    return old.length;
  }
}

const expiryKey = (at: number, key: string) => `${String(at).padStart(15, '0')}-${key}`;
