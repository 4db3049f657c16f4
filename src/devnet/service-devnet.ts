/**
 * What the command line's composition root takes from the devnet when it runs on one (`gate402 start`, or a part
 * given a devnet manifest): the demo keys (relayers, the stock desk, the MPP receipt signer, all derived from the
 * public test mnemonic), the local fixture upstreams the built-in catalog is served by, and that catalog. The
 * product never imports this module; off the devnet none of it exists.
 */
import type { Hex } from 'viem';
import type { LocalAccount } from 'viem/accounts';
import { CAIP2 } from '../chain/canonical.ts';
import { ConfigError, envString } from '../config/env.ts';
import { Agent } from 'undici';
import type { Merchant, Upstream } from '../gateway/catalog/merchant.ts';
import { forwardToUpstream } from '../gateway/paywall/forward.ts';
import { confinedUpstreamUrl } from '../gateway/paywall/upstream-path.ts';
import type { PreparedCall, UpstreamRequest } from '../ports/upstream.ts';
import { ok, refusal } from '../protocol/result.ts';
import { urlPort } from '../gateway/upstream-guard/guard.ts';
import { DEVNET_ROLES, devnetAccount, devnetPrivateKey } from './accounts.ts';
import { builtinCatalog } from './catalog/catalog.ts';
import { startFixtureUpstreams } from './fixtures/server.ts';
import type { DevnetManifest } from './manifest.ts';

/** DEVNET ONLY: the key that signs MPP receipts on the embedded default (derived from the public test mnemonic). */
const DEVNET_RECEIPT_KEY_INDEX = 60;
/** DEVNET ONLY: the receiver authorizer of payment channels on the embedded default (from the public test mnemonic). */
const DEVNET_CHANNEL_AUTHORIZER_KEY_INDEX = 61;
/** DEVNET ONLY: the secret header the built-in catalog sends to its local fixture upstreams. */
export const DEVNET_UPSTREAM_SECRET = 'devnet-fixture-key-not-a-secret';

/** Where the built-in catalog's upstreams are: a base per slug, the one origin to allowlist, and how to stop them. */
export interface DevnetUpstreams {
  baseFor(slug: string): string;
  /** What the built-in merchant of `slug` records as its upstream: the same on every node of a cluster. */
  upstreamFor(slug: string): Upstream;
  /**
   * The `fixtures/{slug}` internal upstreams (see `upstreamFor`), answered by this node's own fixture server; and
   * `chain-stocks` on a node whose stock API is off (its record names the stock data on every node).
   */
  call(slug: string, request: UpstreamRequest): PreparedCall;
  /** The upstream allowlist entry (`host:port`) of exactly their origin. */
  allowlistEntry: string;
  close(): Promise<void>;
}

export interface ServiceDevnet {
  /** The relayers used when no GATE402_RELAYER_KEYS is given. */
  relayers: readonly LocalAccount[];
  /** The stock desk used when no GATE402_STOCK_DESK_KEY is given. */
  deskAccount: LocalAccount;
  /** The MPP receipt key used when no GATE402_GATEWAY_KEY is given. */
  receiptKey: Hex;
  /** The payment channels' receiver authorizer used when no GATE402_CHANNEL_AUTHORIZER_KEY is given. */
  channelAuthorizerKey: Hex;
  /** The stock chain's RPC, offered to wallets by the pages. */
  walletRpcUrl: string | undefined;
  /**
   * The built-in catalog's upstreams: started here unless `GATE402_CATALOG_UPSTREAM_BASE` names them. Exactly their
   * origin is to be allowlisted, not the whole host: the chain RPCs, the facilitator and the gateway listen on other
   * ports of the same loopback address, and a self-registered merchant must not reach them.
   */
  upstreams(env: NodeJS.ProcessEnv): Promise<DevnetUpstreams>;
  /**
   * The built-in catalog against `upstreams`, paid to the manifest's merchants; identical on every node (`internal`,
   * the upstreams this node serves inside, is not consulted: chain-stocks names the stock data on every node).
   */
  catalog(networks: readonly string[], upstreams: DevnetUpstreams, internal?: ReadonlySet<'stock-data'>): Merchant[];
}

export function serviceDevnet(manifest: DevnetManifest): ServiceDevnet {
  return {
    relayers: DEVNET_ROLES.relayers.map((i) => devnetAccount(i)),
    deskAccount: devnetAccount(DEVNET_ROLES.stockDesk),
    receiptKey: devnetPrivateKey(DEVNET_RECEIPT_KEY_INDEX) as Hex,
    channelAuthorizerKey: devnetPrivateKey(DEVNET_CHANNEL_AUTHORIZER_KEY_INDEX) as Hex,
    walletRpcUrl: manifest.networks[CAIP2.stockChain]?.rpcUrl,
    async upstreams(env) {
      const fixtureBase = envString(env, 'GATE402_CATALOG_UPSTREAM_BASE', '');
      if (fixtureBase) {
        // Named by the operator: every node given the same base records the same upstream.
        const baseFor = (slug: string) => `${fixtureBase.replace(/\/$/, '')}/${slug}`;
        const agent = fixtureAgent();
        return {
          baseFor,
          upstreamFor: (slug) => fixtureUrlUpstream(baseFor(slug)),
          call: fixtureCall(baseFor, agent),
          allowlistEntry: originEntry(baseFor('catalog')),
          close: () => agent.close(),
        };
      }
      // Each node runs its own fixture server, on a port of its own: the records name the logical `fixtures/{slug}`
      // upstream, which each node answers from its own server, so whichever node seeded them every node can serve.
      const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
      const baseFor = (slug: string) => fixtures.baseUrlFor(slug);
      const agent = fixtureAgent();
      return {
        baseFor,
        upstreamFor: (slug) => ({ kind: 'internal', name: `fixtures/${slug}` }),
        call: fixtureCall(baseFor, agent),
        allowlistEntry: originEntry(baseFor('catalog')),
        close: async () => {
          await fixtures.close();
          await agent.close();
        },
      };
    },
    catalog(networks, upstreams) {
      // Against local fixture upstreams, so everything works offline; chain-stocks from the stock chain itself, on
      // every node alike (a node whose stock API is off refuses it before payment): the records are identical
      // whichever node writes them, in whatever order nodes start, so a second node finds them written and writes
      // nothing (no per-node upstream, no per-start timestamp).
      const payees = manifest.accounts.merchants.map((m) => m.address);
      return builtinCatalog({
        payTo: (slug) => payees[[...slug].reduce((h, c) => h + c.charCodeAt(0), 0) % payees.length] as `0x${string}`,
        networks: [...networks],
        upstreamFor: (slug) => upstreams.upstreamFor(slug),
        internal: new Set(['stock-data']),
        owner: devnetAccount(DEVNET_ROLES.deployer).address,
        now: BUILTIN_CATALOG_DATE,
      });
    },
  };
}

/** The catalog's createdAt/updatedAt on the devnet: fixed, so every node (and every start) writes the same records. */
export const BUILTIN_CATALOG_DATE = Date.UTC(2026, 0, 1);

/** Bounds on a call to this node's own fixture server. */
const FIXTURE_LIMITS = { timeoutMs: 15_000, maxBytes: 10 * 1024 * 1024 };

function fixtureAgent(): Agent {
  return new Agent({ connectTimeout: FIXTURE_LIMITS.timeoutMs, headersTimeout: FIXTURE_LIMITS.timeoutMs, bodyTimeout: FIXTURE_LIMITS.timeoutMs });
}

/** A call to the fixture upstream of `slug`, at `baseFor(slug)`, confined to it as any URL upstream is. */
function fixtureCall(baseFor: (slug: string) => string, agent: Agent): (slug: string, request: UpstreamRequest) => PreparedCall {
  return (slug, request) => {
    const url = confinedUpstreamUrl(baseFor(slug), request.path, request.query);
    if (!url.ok) return refusal('invalid_input', url.error.message, 400);
    return ok(() => forwardToUpstream(url.value, { 'x-api-key': DEVNET_UPSTREAM_SECRET }, request, agent, FIXTURE_LIMITS));
  };
}

function fixtureUrlUpstream(baseUrl: string): Upstream {
  return { kind: 'url', baseUrl, secretHeaders: { 'x-api-key': DEVNET_UPSTREAM_SECRET } };
}

/** The upstream allowlist entry (`host:port`) of exactly the origin of `url`. */
function originEntry(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(`GATE402_CATALOG_UPSTREAM_BASE must be an absolute http(s) URL, got '${url}'`);
  }
  return `${parsed.hostname}:${urlPort(parsed)}`;
}
