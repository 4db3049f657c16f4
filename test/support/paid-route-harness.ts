/**
 * The paid route with fake ports, in-process: a fake settlement (it answers what a test says, and like the engine
 * settles a payment once: asked again, it answers the recorded settlement without charging), an in-process upstream
 * that counts its calls, a logical clock, and real LMDB stores in a temp directory. No chain, no socket, no process.
 */
import { rmSync } from 'node:fs';
import type { Test } from 'tap';
import { type LocalAccount, keccak256, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2, USDC_BASE_ADDRESS } from '../../src/chain/canonical.ts';
import { NetworkRegistry } from '../../src/chain/networks.ts';
import type { Door } from '../../src/front-door/door.ts';
import { mppDoor } from '../../src/front-door/mpp.ts';
import { x402Door } from '../../src/front-door/x402.ts';
import type { Merchant } from '../../src/gateway/catalog/merchant.ts';
import type { PaywallChannels } from '../../src/gateway/paywall/channel-paid.ts';
import type { Store } from '../../src/store/store.ts';
import { paidRouteHandler, type PaidRequestRecord } from '../../src/gateway/paywall/paid-route.ts';
import { PaymentIds, type PaymentIdRecord } from '../../src/gateway/paywall/payment-ids.ts';
import type { HttpRequest, HttpResponse } from '../../src/http/server.ts';
import type { Logger } from '../../src/log/logger.ts';
import type { Settlement, Shed } from '../../src/ports/settlement.ts';
import type { UpstreamRequest, UpstreamResult } from '../../src/ports/upstream.ts';
import { ok } from '../../src/protocol/result.ts';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '../../src/protocol/x402/headers.ts';
import type { PaymentPayload, PaymentRequirements, SettleResponse, VerifyRequest } from '../../src/protocol/x402/types.ts';
import { CircuitBreakers } from '../../src/resilience/circuit-breaker.ts';
import { nonceKeyOf } from '../../src/schemes/payment-identity.ts';
import { openLmdbStore } from '../../src/store/lmdb/open-lmdb-store.ts';
import { officialPayment } from '../helpers/payments.ts';
import { tempDir } from '../helpers/temp-dir.ts';

export const PAY_TO = '0x00000000000000000000000000000000000000b2' as const;
export const MPP_KEY = new Uint8Array(32).fill(7);
/** A receipt key for the test only: a fresh key each run. */
export const RECEIPT_KEY = generatePrivateKey();
export const BASE = 'https://gateway.test';

export const networks = new NetworkRegistry([
  { caip2: CAIP2.base, chainId: 8453, rpcUrl: 'http://127.0.0.1:9', stablecoin: { address: USDC_BASE_ADDRESS, name: 'USD Coin', version: '2', decimals: 6, symbol: 'USDC' } },
]);

export const merchant: Merchant = {
  slug: 'shop',
  name: 'Shop',
  description: 'sells jokes',
  payTo: PAY_TO,
  networks: [CAIP2.base],
  upstream: { kind: 'internal', name: 'stock-data' },
  routes: [{ route: 'joke', methods: ['GET', 'POST'], priceUsd: '0.010000', summary: 'A joke', description: 'one joke', input: 'none', operationId: 'shop-joke' }],
  owner: PAY_TO,
  createdAt: 0,
  updatedAt: 1,
};

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {}, child: () => quiet };

/** A settlement port whose answers a test sets. Like the engine, it settles a payment once (by its nonce key). */
export class FakeSettlement implements Settlement {
  settleCalls = 0;
  /** Payments charged: settled for the first time. */
  charges = 0;
  shed: Shed | undefined;
  /** What a first settle of a payment answers (default: settled). */
  answer: (request: VerifyRequest) => SettleResponse | Promise<SettleResponse> = (request) => settledAnswer(request);
  readonly #settled = new Map<string, SettleResponse>();

  verify = async (request: VerifyRequest) => ({ isValid: true, payer: payerOf(request) });
  shedding = async () => this.shed;
  supported = () => ({ kinds: [], extensions: [], signers: {} });
  settle = async (request: VerifyRequest): Promise<SettleResponse> => {
    this.settleCalls += 1;
    const key = nonceKeyOf(request);
    const done = this.#settled.get(key);
    if (done) return done;
    const answer = await this.answer(request);
    if (answer.success) {
      this.charges += 1;
      this.#settled.set(key, answer);
    }
    return answer;
  };
}

function payerOf(request: VerifyRequest): string {
  return (request.paymentPayload.payload as { authorization: { from: string } }).authorization.from;
}

export function settledAnswer(request: VerifyRequest): SettleResponse {
  return { success: true, transaction: keccak256(toHex(nonceKeyOf(request))), network: request.paymentRequirements.network, payer: payerOf(request) };
}

/** The in-process upstream: counts calls, answers what `answer` says (default 200 `a joke`). */
export class FakeUpstream {
  calls = 0;
  inFlight = 0;
  maxInFlight = 0;
  answer: (request: UpstreamRequest) => Promise<UpstreamResult> = async () => ok({ status: 200, headers: { 'content-type': 'text/plain' }, body: Buffer.from('a joke'), latencyMs: 1 });
  readonly internal = (_name: string, request: UpstreamRequest) =>
    ok(async () => {
      this.calls += 1;
      this.inFlight += 1;
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
      try {
        return await this.answer(request);
      } finally {
        this.inFlight -= 1;
      }
    });
}

export interface Harness {
  handle(req: HttpRequest): Promise<HttpResponse>;
  settlement: FakeSettlement;
  upstream: FakeUpstream;
  breakers: CircuitBreakers;
  clock: { ms: number };
  records(): Promise<PaidRequestRecord[]>;
  challenges: string[];
  /** The route's x402 offer, once a 402 has made it. */
  offer?: PaymentRequirements;
}

export function harness(
  t: Test,
  opts: {
    doors?: (defaults: Door[]) => Door[];
    breaker?: { threshold: number; openMs: number };
    breakers?: CircuitBreakers;
    channels?: (store: Store) => PaywallChannels;
    merchant?: Merchant;
    settlement?: Settlement;
  } = {},
): Harness {
  const dir = tempDir('paid-route');
  const store = openLmdbStore(dir);
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const clock = { ms: Date.now() };
  const now = () => clock.ms;
  const settlement = new FakeSettlement();
  const upstream = new FakeUpstream();
  const breakers = opts.breakers ?? new CircuitBreakers({ ...(opts.breaker ?? { threshold: 5, openMs: 30_000 }), now });
  const defaults: Door[] = [x402Door({ baseUrl: BASE }), mppDoor({ key: MPP_KEY, realm: 'gateway.test', receiptKey: RECEIPT_KEY, now })];
  const records = store.collection<PaidRequestRecord>('paid-requests');
  const challenges: string[] = [];
  const paymentIds = new PaymentIds(
    { claims: store.claims('payment-ids'), records: store.collection<PaymentIdRecord>('payment-ids'), expiry: store.collection<string>('payment-id-expiry') },
    { maxBodyBytes: 65_536, retentionMs: 3_600_000, leaseMs: 60_000, waitMs: 1_000, maxWaiting: 16 },
    now,
  );
  const shop = opts.merchant ?? merchant;
  const handler = paidRouteHandler({
    settlement: opts.settlement ?? settlement,
    ...(opts.channels ? { channels: opts.channels(store) } : {}),
    doors: opts.doors ? opts.doors(defaults) : defaults,
    merchant: (slug) => (slug === shop.slug ? shop : undefined),
    networks,
    stores: { served: store.claims('served'), paymentIds, records },
    upstream: { dispatcher: undefined as never, readFile: async () => undefined, internal: upstream.internal, timeoutMs: 5_000, maxBytes: 1 << 20 },
    breakers,
    challengeTtlMs: 300_000,
    log: quiet,
    metrics: { challengeIssued: (p) => challenges.push(p), upstreamCall() {}, revenue() {}, paymentShed() {} },
    now,
  });
  return {
    handle: async (req) => handler(req),
    settlement,
    upstream,
    breakers,
    clock,
    records: async () => {
      const out: PaidRequestRecord[] = [];
      for await (const [, v] of records.entries()) out.push(v);
      return out;
    },
    challenges,
  };
}

/** A request to `/m/shop/{route}`, as the server hands it to a handler. */
export function request(method: string, headers: Record<string, string> = {}, body?: string, route = 'joke'): HttpRequest {
  const bytes = body === undefined ? new Uint8Array(0) : Buffer.from(body);
  return {
    method,
    path: `/m/shop/${route}`,
    query: '',
    headers: { ...(body !== undefined ? { 'content-length': String(bytes.length), 'content-type': 'application/json' } : {}), ...headers },
    remoteIp: '203.0.113.7',
    params: { slug: 'shop', '*': route },
    body: async () => bytes,
  };
}

/** The x402 offer a 402 makes. */
export function offerOf(answer: HttpResponse): PaymentRequirements {
  const header = answer.headers?.['PAYMENT-REQUIRED'];
  if (header === undefined) throw new Error('no PAYMENT-REQUIRED');
  const decoded = decodePaymentRequiredHeader(header);
  if (!decoded.ok || !decoded.value.accepts[0]) throw new Error('PAYMENT-REQUIRED does not decode');
  return decoded.value.accepts[0];
}

/** A fresh payer's x402 payment for the route's offer (signed by the official client), with `extensions` added (the first asks for a 402). */
export async function x402Payment(h: Harness, extensions?: Record<string, unknown>, payer: LocalAccount = privateKeyToAccount(generatePrivateKey())): Promise<PaymentPayload> {
  h.offer ??= offerOf(await h.handle(request('GET')));
  const payment = await officialPayment(payer, h.offer);
  return extensions ? { ...payment, extensions } : payment;
}

export function x402Headers(payment: PaymentPayload): Record<string, string> {
  return { 'payment-signature': encodePaymentSignatureHeader(payment) };
}

/** Every header of an answer, the shared and the per-answer ones, by lower-cased name. */
export function headersOf(answer: HttpResponse): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(answer.headers ?? {})) out[k.toLowerCase()] = v;
  for (const [k, v] of Object.entries(answer.moreHeaders ?? {})) out[k.toLowerCase()] = typeof v === 'string' ? v : v.value;
  return out;
}

export function bodyOf(answer: HttpResponse): string {
  return typeof answer.body === 'string' ? answer.body : Buffer.from(answer.body ?? new Uint8Array(0)).toString('utf8');
}

/** A promise and its resolver: a gate a test opens. */
export function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
