import { channelViewHandler } from '../channels/channel-view.ts';
import { createHmac } from 'node:crypto';
import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { NetworkRegistry } from '../chain/networks.ts';
import { ConfigError, envHost, envInt, envString } from '../config/env.ts';
import { createHttpServer, json, type HttpHandler, type RouteOptions } from '../http/server.ts';
import { trustProxyFromEnv, type TrustProxy } from '../http/trust-proxy.ts';
import type { Logger } from '../log/logger.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { Settlement } from '../ports/settlement.ts';
import type { Store } from '../store/open-store.ts';
import type { Merchant } from './catalog/merchant.ts';
import { MerchantSnapshot } from './discovery/merchant-snapshot.ts';
import { discoveryRoutes } from './discovery/routes.ts';
import { CircuitBreakers } from '../resilience/circuit-breaker.ts';
import { mppDoor } from '../front-door/mpp.ts';
import { x402Door } from '../front-door/x402.ts';
import { channelDoor } from '../front-door/batch-settlement.ts';
import { channelConfigFromEnv, claimPath, paywallChannels, startChannelClaimer, type ChannelConfig, type ClaimCluster } from './paywall/channel-composition.ts';
import type { SendingChain } from '../tx/sending-chain.ts';
import type { InternalUpstream } from './paywall/forward.ts';
import { paidRouteHandler, type PaidRequestRecord } from './paywall/paid-route.ts';
import { PaymentIds, type PaymentIdRecord } from './paywall/payment-ids.ts';
import type { BootLiveness } from './paywall/served-claims.ts';
import { guardedDispatcher } from './upstream-guard/guard.ts';
import { UpstreamPreflight } from './upstream-guard/preflight.ts';

/** Where merchants come from: the registry (and the built-in catalog it was seeded with). */
export interface MerchantDirectory {
  /** Synchronously when the merchant is at hand (cached), else a promise of the store's answer. */
  get(slug: string): Merchant | undefined | Promise<Merchant | undefined>;
  list(): Promise<Merchant[]>;
  /** Calls `listener` after each change (the registry's `onChange`); without it, lists are kept `discoveryCacheMs`. */
  onChange?(listener: () => void): () => void;
}

export interface GatewayConfig {
  host: string;
  port: number;
  /** The public URL buyers use; discovery documents and x402 resources name it. */
  baseUrl: string;
  maxBodyBytes: number;
  /** The request body limit of paid routes (`/m/{slug}/...`); registration uploads have their own (route options). */
  paidMaxBodyBytes: number;
  upstreamTimeoutMs: number;
  /** How long connecting to an upstream may take (within the call's whole timeout). */
  upstreamConnectTimeoutMs: number;
  /** The largest upstream response a paid request takes. */
  upstreamMaxBytes: number;
  challengeTtlMs: number;
  /** Hosts or CIDRs of upstreams the operator allows although private (the devnet's local fixtures). */
  upstreamAllowlist: string[];
  /** Signs MPP receipts; its address is published in discovery. */
  receiptKey: Hex;
  /** Binds MPP challenge ids (HMAC); derived from the receipt key unless given. */
  mppKey: Uint8Array;
  realm: string;
  contactEmail: string;
  breaker: { threshold: number; openMs: number };
  trustProxy: TrustProxy;
  /** x402 payment identifiers: the largest answer body kept for replay, and how long an identifier is kept. */
  paymentIds: { maxBodyBytes: number; retentionMs: number };
  /**
   * How long clients may keep `/llms.txt` (`Cache-Control: max-age`), and how long a merchant list is kept when the
   * directory tells no changes. With a registry (which tells each change) documents are rebuilt on change only.
   */
  discoveryCacheMs: number;
  /** Payment channels (x402 `batch-settlement`): the receiver authorizer's key (none: no route offers them) and the withdraw delay. */
  channels: ChannelConfig;
}

export function gatewayConfigFromEnv(env: NodeJS.ProcessEnv, defaults: { receiptKey?: Hex; upstreamAllowlist?: string[]; channelAuthorizerKey?: Hex } = {}): GatewayConfig {
  const host = envHost(env, 'GATE402_GATEWAY_HOST', '127.0.0.1');
  const port = envInt(env, 'GATE402_GATEWAY_PORT', 8402, { min: 0, max: 65535 });
  const receiptKey = envString(env, 'GATE402_GATEWAY_KEY', defaults.receiptKey ?? '') as Hex;
  if (!/^0x[0-9a-fA-F]{64}$/.test(receiptKey)) throw new ConfigError('GATE402_GATEWAY_KEY must be a 0x-prefixed 32-byte private key (it signs MPP receipts)');
  const secret = env.GATE402_MPP_SECRET?.trim();
  const allow = envString(env, 'GATE402_UPSTREAM_ALLOWLIST', (defaults.upstreamAllowlist ?? []).join(','));
  const baseUrl = envString(env, 'GATE402_PUBLIC_URL', `http://${host}:${port}`).replace(/\/$/, '');
  return {
    host,
    port,
    baseUrl,
    maxBodyBytes: envInt(env, 'GATE402_GATEWAY_MAX_BODY_BYTES', 16 * 1024, { min: 1024, max: 64 * 1024 * 1024 }),
    paidMaxBodyBytes: envInt(env, 'GATE402_PAID_MAX_BODY_BYTES', 1024 * 1024, { min: 0, max: 64 * 1024 * 1024 }),
    upstreamTimeoutMs: envInt(env, 'GATE402_UPSTREAM_TIMEOUT_MS', 15_000, { min: 100, max: 300_000 }),
    upstreamConnectTimeoutMs: envInt(env, 'GATE402_UPSTREAM_CONNECT_TIMEOUT_MS', 10_000, { min: 100, max: 300_000 }),
    upstreamMaxBytes: envInt(env, 'GATE402_UPSTREAM_MAX_BYTES', 10 * 1024 * 1024, { min: 1024, max: 1024 * 1024 * 1024 }),
    challengeTtlMs: envInt(env, 'GATE402_CHALLENGE_TTL_MS', 300_000, { min: 10_000, max: 3_600_000 }),
    upstreamAllowlist: allow
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    receiptKey,
    mppKey: secret
      ? new TextEncoder().encode(secret)
      : createHmac('sha256', Buffer.from(receiptKey.slice(2), 'hex'))
          .update('gate402 mpp challenge key')
          .digest(),
    realm: envString(env, 'GATE402_REALM', publicHost(baseUrl)),
    contactEmail: envString(env, 'GATE402_CONTACT_EMAIL', 'operator@gate402.invalid'),
    breaker: { threshold: envInt(env, 'GATE402_BREAKER_THRESHOLD', 5, { min: 1, max: 1000 }), openMs: envInt(env, 'GATE402_BREAKER_OPEN_MS', 30_000, { min: 100, max: 3_600_000 }) },
    trustProxy: trustProxyFromEnv(env),
    paymentIds: {
      maxBodyBytes: envInt(env, 'GATE402_PAYMENT_ID_MAX_BODY_BYTES', 256 * 1024, { min: 0, max: 16 * 1024 * 1024 }),
      retentionMs: envInt(env, 'GATE402_PAYMENT_ID_RETENTION_SECONDS', 86_400, { min: 60, max: 30 * 86_400 }) * 1000,
    },
    discoveryCacheMs: envInt(env, 'GATE402_DISCOVERY_CACHE_MS', 5000, { min: 0, max: 3_600_000 }),
    channels: channelConfigFromEnv(env, defaults.channelAuthorizerKey),
  };
}

/** The MPP realm by default: the host buyers reach the gateway at (validators check a challenge's realm against it). */
function publicHost(baseUrl: string): string {
  try {
    return new URL(baseUrl).hostname;
  } catch {
    throw new ConfigError(`GATE402_PUBLIC_URL must be an absolute http(s) URL, got '${baseUrl}'`);
  }
}

export interface RunningGateway {
  url: string;
  port: number;
  receiptSigner: `0x${string}`;
  close(): Promise<void>;
}

export interface GatewayParts {
  networks: NetworkRegistry;
  /** What verifies, settles and sheds paid requests' payments: the local engine or remote facilitators, the root picks. */
  settlement: Settlement;
  /** Payments being settled now, for /health (O(1)); none told: 0. */
  load?: () => number;
  store: Store;
  merchants: MerchantDirectory;
  readFile(sha256: string): Promise<Uint8Array | undefined>;
  /** The upstreams served inside the gateway, which built-in merchants may name. */
  internalUpstream: InternalUpstream;
  /** Whose `serving` claims stand (a cluster's live nodes); default: this process's only. */
  live?: BootLiveness;
  /** The merchants as discovery sees them, shared with other parts (the merchant list, the bazaar); else made here. */
  snapshot?: MerchantSnapshot;
  /**
   * The local engine's chain parts (relayers, block watcher, reorg guard): with them, the vouchers the channels
   * accept are claimed and swept here (`channels/claimer.ts`); without, nothing claims them.
   */
  chain?(caip2: string): SendingChain | undefined;
  /** In a cluster: the claimer runs on the node holding the claim lease alone (`channels/claim-lease.ts`). */
  claimCluster?: ClaimCluster;
  /** Extra routes mounted by other parts (merchant registration, stock API, ...). */
  extraRoutes?: Array<{ method: string; path: string; handler: HttpHandler; options?: RouteOptions }>;
  log: Logger;
  metrics: Metrics;
}

/** The marketplace: discovery, the paid reverse proxy under /m/{slug}/, and whatever extra routes are given. */
export async function runGateway(parts: GatewayParts, config: GatewayConfig): Promise<RunningGateway> {
  const dispatcher = guardedDispatcher(config.upstreamAllowlist, {
    connectTimeoutMs: Math.min(config.upstreamConnectTimeoutMs, config.upstreamTimeoutMs),
    headersTimeoutMs: config.upstreamTimeoutMs,
    bodyTimeoutMs: config.upstreamTimeoutMs,
  });
  const receiptSigner = privateKeyToAccount(config.receiptKey).address;
  // Discovery documents, the merchant count of /health and the metrics' merchant series: read once per change.
  const snapshot = parts.snapshot ?? new MerchantSnapshot(parts.merchants, { maxAgeMs: config.discoveryCacheMs, onError: (error) => parts.log.error('could not read the merchants', { error }) });
  await snapshot.current();
  const breakers = new CircuitBreakers(config.breaker);
  parts.metrics.watchBreakers(async () => (await snapshot.current()).merchants.map((m) => [m.slug, breakers.state(m.slug)]));
  parts.metrics.watchMerchants(async () => (await snapshot.current()).merchants.map((m) => m.slug));
  const paymentIds = new PaymentIds(
    { claims: parts.store.claims('payment-ids'), records: parts.store.collection<PaymentIdRecord>('payment-ids'), expiry: parts.store.collection<string>('payment-id-expiry') },
    {
      ...config.paymentIds,
      // A request holds its identifier while it settles and calls the upstream; one held longer belongs to a node that died.
      leaseMs: config.upstreamTimeoutMs + 120_000,
      waitMs: config.upstreamTimeoutMs + 5_000,
      maxWaiting: 1024,
    },
    Date.now,
  );
  // Identifiers past their retention are forgotten, a bounded batch at a time.
  const sweeping = setInterval(() => {
    paymentIds.sweep().catch((err: unknown) => parts.log.error('could not forget expired payment identifiers', { error: err }));
  }, 60_000);
  sweeping.unref();
  const paywall = paywallChannels(config.channels, parts);
  const actors =
    paywall && parts.chain
      ? await startChannelClaimer(config.channels, paywall, { ...parts, chain: parts.chain, cluster: parts.claimCluster, log: parts.log.child({ part: 'channel-claims' }) })
      : undefined;
  const claimer = actors?.claimer;
  // Vouchers are taken only while their claims can be made (see `ChannelClaimer.claiming`); refunds through the desk.
  const counted = (network: string, outcome: string) => parts.metrics.channelVouchers.labels(network, outcome).inc();
  const channels = paywall && actors ? { ...paywall, ...claimPath(actors.claimer), refunds: actors.refunds, counted } : paywall && { ...paywall, counted };
  const doors = [x402Door({ baseUrl: config.baseUrl }), mppDoor({ key: config.mppKey, realm: config.realm, receiptKey: config.receiptKey, now: Date.now })];
  const paid = paidRouteHandler({
    settlement: parts.settlement,
    // The channel door first: its credentials are x402's, which the x402 door would refuse as of another scheme.
    doors: channels ? [channelDoor(), ...doors] : doors,
    ...(channels ? { channels } : {}),
    merchant: (slug) => parts.merchants.get(slug),
    networks: parts.networks,
    stores: {
      served: parts.store.claims('served'),
      paymentIds,
      records: parts.store.collection<PaidRequestRecord>('paid-requests'),
      ...(parts.live ? { live: parts.live } : {}),
    },
    upstream: {
      dispatcher,
      readFile: parts.readFile,
      internal: parts.internalUpstream,
      timeoutMs: config.upstreamTimeoutMs,
      maxBytes: config.upstreamMaxBytes,
      preflight: new UpstreamPreflight(config.upstreamAllowlist),
    },
    breakers,
    challengeTtlMs: config.challengeTtlMs,
    log: parts.log.child({ part: 'paywall' }),
    metrics: parts.metrics,
    now: Date.now,
  });
  const server = createHttpServer({
    host: config.host,
    port: config.port,
    maxBodyBytes: config.maxBodyBytes,
    trustProxy: config.trustProxy,
    log: (l) => parts.log.error(l),
    observe: parts.metrics.httpObserver('gateway'),
  });
  server
    // O(1): the store's write health (a probe write at most once a second while failing) and two counters.
    .route('GET', '/health', async () => {
      const store = await parts.store.probe();
      if (!store.ok) return json(503, { ok: false, store: { ok: false, error: 'the data store cannot write', since: new Date(store.error.since).toISOString() } });
      return json(200, { ok: true, merchants: snapshot.count, inFlight: parts.load?.() ?? 0 }, { 'cache-control': 'no-store' });
    })
    .route('GET', '/.well-known/gate402', () =>
      json(200, {
        receiptSigner,
        realm: config.realm,
        receipts: 'Payment-Receipt is base64url JSON; drop `signature`, canonicalize (RFC 8785), and check it is an EIP-191 signature by receiptSigner',
      }),
    );
  for (const r of discoveryRoutes({
    snapshot,
    networks: parts.networks,
    baseUrl: config.baseUrl,
    contactEmail: config.contactEmail,
    realm: config.realm,
    llmsMaxAgeSeconds: Math.floor(config.discoveryCacheMs / 1000),
  }))
    server.route(r.method, r.path, r.handler);
  for (const r of parts.extraRoutes ?? []) server.route(r.method, r.path, r.handler, r.options);
  // A payer's view of a channel (balance, spent, remaining): one record read.
  if (channels) server.route('GET', '/api/channels/:channelId', channelViewHandler(channels.ledger, parts.networks));
  // Paid routes have their own body limit, and read a body only once its credential has passed the cheap checks.
  for (const method of ['GET', 'POST']) server.route(method, '/m/:slug/*', paid, { maxBodyBytes: config.paidMaxBodyBytes, bodyOnDemand: true });
  const port = await server.listen();
  const url = `http://${config.host}:${port}`;
  parts.log.info('gateway listening', { url, publicUrl: config.baseUrl });
  return {
    url,
    port,
    receiptSigner,
    async close() {
      clearInterval(sweeping);
      await claimer?.stop();
      actors?.refunds.desk.stop();
      if (parts.snapshot === undefined) snapshot.close();
      await server.close();
      await dispatcher.close();
    },
  };
}
