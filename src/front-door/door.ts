/**
 * A door: one way to pay for what is sold for a 402 (x402, MPP, ...). The paid route knows doors only through this
 * interface: it asks each, in order, what a request's payment headers amount to (the first that recognises them
 * answers), composes the one 402 from every door's challenge (`payment-required.ts`), and has the door that read a
 * credential write its receipt. A new way to pay is one new door. Doors are pure but for their keys and clock,
 * which come in when they are made.
 */
import type { Network } from '../chain/networks.ts';
import type { FilledHeader } from '../http/header-template.ts';
import type { ChargeRequest, ProblemCode } from '../protocol/mpp/types.ts';
import type { PaymentRequirements, SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';

/** What a route asks to be paid, as every door reads it: the same `key`, the same terms (the clock is each door's own). */
export interface RouteTerms {
  /** Names the terms (merchant, its version, route): what a door may memoize its challenges under. */
  key: string;
  /** The x402 offers this route advertises. */
  offers: PaymentRequirements[];
  /**
   * The MPP charge this route asks for, and its network; `routeTags` holds the route tag (see `binding.ts`) of each
   * method the route serves, which a challenge's `opaque` must start with.
   */
  mpp?: { request: ChargeRequest; network: Network; requirements: PaymentRequirements; routeTags: Readonly<Record<string, string>> };
  /** What is sold, in a few words (x402's resource description). */
  summary: string;
  /** Who sells what (an MPP challenge's description). */
  title: string;
  /** The price, in USD. */
  priceUsd: string;
  /** The x402 extensions a 402 of each method declares. */
  extensions: Readonly<Partial<Record<'GET' | 'POST', Record<string, unknown>>>>;
}

/** A credential a door recognised: the x402 payment it pays with, whatever its protocol, and what else it keeps. */
export interface PaidCredential {
  /** The protocol of the door that read it. */
  readonly protocol: string;
  /** What the settlement port verifies and settles. */
  readonly request: VerifyRequest;
}

/** A credential a door recognised as its protocol's and refused: the 402 (or 400) says why, nothing is charged. */
export interface DoorRefusal {
  protocol: string;
  status: 400 | 402;
  problem: ProblemCode;
  detail: string;
  challengeId?: string;
}

/** What a door makes of a request's payment headers. */
export type Reading<C extends PaidCredential = PaidCredential> = { kind: 'none' } | { kind: 'credential'; credential: C } | { kind: 'refused'; refusal: DoorRefusal };

/** The parts of a request a door reads: its headers, and its method (a challenge may be bound to it). */
export interface PaymentHeaders {
  readonly method: string;
  readonly headers: Readonly<Record<string, string>>;
}

/** The 402 a door's challenge goes into. */
export interface ChallengeContext {
  /** The method a challenge binds (HEAD is GET). */
  method: 'GET' | 'POST';
  /** The request's path (the resource). */
  path: string;
  /** The `expires` second of the challenges made now (whole seconds since the epoch). */
  expiresSecond: number;
  /** Why a credential was refused, when one was. */
  error?: string;
}

/** One challenge of a fresh 402: its header, and the id the problem body names. */
export interface IssuedChallenge {
  name: string;
  value: string | FilledHeader;
  challengeId: string;
}

/** A door's part of a 402. */
export interface ChallengePart {
  /** Headers the same in every 402 of one terms key, method, path and `expires` second (the unpaid 402 keeps them). */
  headers: Readonly<Record<string, string>>;
  /** A challenge made fresh for each 402 (bound to the request body's `digest`, when it has one). */
  issue?(digest: string | undefined): IssuedChallenge;
}

export interface Door<C extends PaidCredential = PaidCredential> {
  /** Its name (metrics, records). */
  readonly protocol: string;
  /** How to pay through it, in a 402's words, e.g. `x402 (PAYMENT-SIGNATURE)`. */
  readonly invitation: string;
  /** Whether its credentials carry x402 payment identifiers (idempotency keys; see `payment-ids.ts`). */
  readonly identifiesPayments: boolean;
  /** A credential of this door's protocol, a refusal of one, or none (the request does not use this door). */
  read(request: PaymentHeaders, terms: RouteTerms): Reading<C>;
  /** Its part of the 402 for `terms`; undefined when the route cannot be paid through it. */
  challenge(terms: RouteTerms, ctx: ChallengeContext): ChallengePart | undefined;
  /** Why the request's body is not the one `credential` was made for (`digest`: the body's), or undefined. */
  unbound?(credential: C, digest: string | undefined): string | undefined;
  /** The headers proving the payment on the answer to a paid (or pending) request. */
  receipt(settlement: SettleResponse, credential: C): Promise<Record<string, string>>;
  /** Headers a 402 carries for a payment that was refused at settlement. */
  settlementRefused?(settlement: SettleResponse): Record<string, string>;
}
