/**
 * The one 402, composed from every door's challenge: each door's headers in order, a fresh challenge from each door
 * that makes one per 402, and a problem+json body naming the first such challenge.
 *
 * The unpaid 402 is the hot path, and nearly everything in it is deterministic: a route's terms change only with the
 * merchant, the doors' headers only with the path, and a fresh challenge's fields (but its id) only with its
 * `expires` second. So within one `expires` second a path's unpaid 402 is kept as frozen headers and a body prefix,
 * to which each 402 adds its fresh challenges (`moreHeaders`, so the server encodes the shared headers once).
 */
import type { FilledHeader } from '../http/header-template.ts';
import type { HttpResponse } from '../http/server.ts';
import { PROBLEM_CONTENT_TYPE, problemJson } from '../protocol/mpp/problems.ts';
import type { ProblemCode } from '../protocol/mpp/types.ts';
import type { SettleResponse } from '../protocol/x402/types.ts';
import type { ChallengeContext, ChallengePart, Door, IssuedChallenge, RouteTerms } from './door.ts';
import { SecondMemo } from './second-memo.ts';

export interface PaymentRequiredOptions {
  doors: readonly Door[];
  /** How long a challenge made now stays good. */
  challengeTtlMs: number;
  /** The clock challenges expire by. */
  now(): number;
  /** Counts a door's challenge in a 402. */
  counted(protocol: string): void;
}

/** Why a credential was refused: the problem (default `payment-required`), in words, and the settlement's answer. */
export interface Refused {
  problem?: ProblemCode;
  detail: string;
  /** Default: 400 for `method-unsupported`, else 402. */
  status?: 400 | 402;
  /** The settlement that refused the payment. */
  settlement?: SettleResponse;
}

/** The request a 402 answers: its bound method (HEAD is GET), path, and its body's digest when it has a body. */
export interface Asked {
  method: 'GET' | 'POST';
  path: string;
  digest: string | undefined;
}

/** One path's unpaid 402 within one `expires` second. */
type Unpaid =
  | { response: HttpResponse; issuers?: undefined; protocols: readonly string[] }
  | { headers: Readonly<Record<string, string>>; issuers: ReadonlyArray<NonNullable<ChallengePart['issue']>>; bodyHead: string; protocols: readonly string[] };

const freeze = (r: HttpResponse): HttpResponse => Object.freeze({ ...r, ...(r.headers ? { headers: Object.freeze({ ...r.headers }) } : {}) });

/** `a`, `a or b`, `a, b or c`. */
function either(words: readonly string[]): string {
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
}

export class PaymentRequired {
  readonly #doors: readonly Door[];
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #counted: (protocol: string) => void;
  readonly #unpaid = new SecondMemo<Unpaid>();
  readonly #invitation: string;

  constructor(opts: PaymentRequiredOptions) {
    this.#doors = opts.doors;
    this.#ttlMs = opts.challengeTtlMs;
    this.#now = opts.now;
    this.#counted = opts.counted;
    this.#invitation = either(opts.doors.map((d) => d.invitation));
  }

  /** The 402 for a request without a payment: this second's kept 402 for its path, plus fresh challenges. */
  unpaid(terms: RouteTerms, asked: Asked): HttpResponse {
    const second = this.#expiresSecond();
    const kept = this.#unpaid.get(second, `${terms.key}|${asked.method}|${asked.path}`, () => this.#keep(terms, asked, second));
    for (const p of kept.protocols) this.#counted(p);
    if (kept.issuers === undefined) return kept.response;
    const more: Record<string, string | FilledHeader> = {};
    let id: string | undefined;
    for (const issue of kept.issuers) {
      const issued = issue(asked.digest);
      more[issued.name] = issued.value;
      id ??= issued.challengeId;
    }
    return { status: 402, headers: kept.headers, moreHeaders: more, body: `${kept.bodyHead}${id}"}` };
  }

  /** The 402 (or 400) refusing a credential, with fresh challenges to pay again. */
  refused(terms: RouteTerms, asked: Asked, why: Refused): HttpResponse {
    const ctx: ChallengeContext = { method: asked.method, path: asked.path, expiresSecond: this.#expiresSecond(), error: why.detail };
    const headers: Record<string, string> = { 'content-type': PROBLEM_CONTENT_TYPE, 'cache-control': 'no-store' };
    let challengeId: string | undefined;
    for (const door of this.#doors) {
      const part = door.challenge(terms, ctx);
      if (!part) continue;
      Object.assign(headers, part.headers);
      if (part.issue) {
        const issued: IssuedChallenge = part.issue(asked.digest);
        headers[issued.name] = typeof issued.value === 'string' ? issued.value : issued.value.value;
        challengeId ??= issued.challengeId;
      }
      this.#counted(door.protocol);
    }
    if (why.settlement) for (const door of this.#doors) if (door.settlementRefused) Object.assign(headers, door.settlementRefused(why.settlement));
    const code: ProblemCode = why.problem ?? 'payment-required';
    const status = why.status ?? (code === 'method-unsupported' ? 400 : 402);
    return { status, headers, body: JSON.stringify(problemJson(code, why.detail, challengeId)) };
  }

  /** `expires` of a challenge made now, in whole seconds. */
  #expiresSecond(): number {
    return Math.floor((this.#now() + this.#ttlMs) / 1000);
  }

  #keep(terms: RouteTerms, asked: Asked, second: number): Unpaid {
    const ctx: ChallengeContext = { method: asked.method, path: asked.path, expiresSecond: second };
    const headers: Record<string, string> = { 'content-type': PROBLEM_CONTENT_TYPE, 'cache-control': 'no-store' };
    const issuers: NonNullable<ChallengePart['issue']>[] = [];
    const protocols: string[] = [];
    for (const door of this.#doors) {
      const part = door.challenge(terms, ctx);
      if (!part) continue;
      Object.assign(headers, part.headers);
      if (part.issue) issuers.push(part.issue);
      protocols.push(door.protocol);
    }
    const body = JSON.stringify(problemJson('payment-required', `${terms.summary}: ${terms.priceUsd} USD. Pay with ${this.#invitation}.`));
    if (issuers.length === 0) return { response: freeze({ status: 402, headers, body }), protocols };
    // problemJson puts challengeId last: the body is this head, the id, and `"}`.
    return { headers: Object.freeze(headers), issuers, bodyHead: `${body.slice(0, -1)},"challengeId":"`, protocols };
  }
}
