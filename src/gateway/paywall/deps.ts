/** What the paid route is given: deps grouped by what they are for. */
import type { Dispatcher } from 'undici';
import type { NetworkRegistry } from '../../chain/networks.ts';
import type { Door } from '../../front-door/door.ts';
import type { Logger } from '../../log/logger.ts';
import type { Settlement } from '../../ports/settlement.ts';
import type { CircuitBreakers } from '../../resilience/circuit-breaker.ts';
import type { DurableCollection } from '../../store/durable-collection.ts';
import type { NonceClaims } from '../../store/nonce-claims.ts';
import type { Merchant } from '../catalog/merchant.ts';
import type { PaywallChannels } from './channel-paid.ts';
import type { InternalUpstream } from './forward.ts';
import type { PaymentIds } from './payment-ids.ts';
import type { BootLiveness } from './served-claims.ts';

/** One paid request, as recorded: enough to reconcile revenue, disputes and upstream health. */
export interface PaidRequestRecord {
  merchant: string;
  route: string;
  /** The door it was paid through (`x402`, `mpp`). */
  protocol: string;
  payer: string;
  amount: string;
  network: string;
  transaction: string;
  upstreamStatus: number | 'failed';
  latencyMs: number;
  at: number;
}

/** Where a paid request's answer comes from once its payment settles. */
export interface PaywallUpstream {
  dispatcher: Dispatcher;
  readFile(sha256: string): Promise<Uint8Array | undefined>;
  /** The upstreams served inside the gateway (built-in merchants only). */
  internal: InternalUpstream;
  timeoutMs: number;
  /** The largest upstream response body a paid request takes; a larger one fails the call (502, not charged again). */
  maxBytes: number;
  /** The upstream guard's decision before payment (`upstream-guard/preflight.ts`): refused, nothing is charged. */
  preflight?: { refuses(url: string): boolean | Promise<boolean>; refusesNow(url: string): boolean };
}

/** What the paywall keeps. */
export interface PaywallStores {
  /** Which payments have been served upstream: a payment buys one upstream call. */
  served: NonceClaims;
  /** x402 payment identifiers (idempotency keys): what each is bound to, and its recorded answer. */
  paymentIds: PaymentIds;
  records: DurableCollection<PaidRequestRecord>;
  /** Whose `serving` claims still stand (default: this process's only; in a cluster, every live node's). */
  live?: BootLiveness;
}

/** What the paywall counts (a door's protocol is its label). */
export interface PaywallMetrics {
  challengeIssued(protocol: string): void;
  upstreamCall(merchant: string, status: number | 'error', seconds: number): void;
  revenue(merchant: string, protocol: string, usd: number): void;
  paymentShed(network: string, reason: string): void;
}

export interface PaywallDeps {
  /** Verifies, sheds and settles payments (the local engine, or remote facilitators): asked through the port only. */
  settlement: Pick<Settlement, 'verify' | 'settle' | 'shedding'>;
  /** Payment channels (x402 `batch-settlement`): absent, no route offers them. */
  channels?: PaywallChannels;
  /** The ways to pay, in order of precedence: the first that recognises a request's payment headers reads them. */
  doors: readonly Door[];
  /** Synchronously when the merchant is at hand (cached): an unpaid request's 402 is answered without waiting. */
  merchant(slug: string): Merchant | undefined | Promise<Merchant | undefined>;
  networks: NetworkRegistry;
  stores: PaywallStores;
  upstream: PaywallUpstream;
  /** One per merchant: a failing upstream is refused before anyone pays for it. */
  breakers: CircuitBreakers;
  /** How long a challenge stays good. */
  challengeTtlMs: number;
  log: Logger;
  metrics: PaywallMetrics;
  now(): number;
}
