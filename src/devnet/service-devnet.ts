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
import type { Merchant } from '../gateway/catalog/merchant.ts';
import { urlPort } from '../gateway/upstream-guard/guard.ts';
import { DEVNET_ROLES, devnetAccount, devnetPrivateKey } from './accounts.ts';
import { builtinCatalog } from './catalog/catalog.ts';
import { startFixtureUpstreams } from './fixtures/server.ts';
import type { DevnetManifest } from './manifest.ts';

/** DEVNET ONLY: the key that signs MPP receipts on the embedded default (derived from the public test mnemonic). */
const DEVNET_RECEIPT_KEY_INDEX = 60;
/** DEVNET ONLY: the secret header the built-in catalog sends to its local fixture upstreams. */
export const DEVNET_UPSTREAM_SECRET = 'devnet-fixture-key-not-a-secret';

/** Where the built-in catalog's upstreams are: a base per slug, the one origin to allowlist, and how to stop them. */
export interface DevnetUpstreams {
  baseFor(slug: string): string;
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
  /** The stock chain's RPC, offered to wallets by the pages. */
  walletRpcUrl: string | undefined;
  /**
   * The built-in catalog's upstreams: started here unless `GATE402_CATALOG_UPSTREAM_BASE` names them. Exactly their
   * origin is to be allowlisted, not the whole host: the chain RPCs, the facilitator and the gateway listen on other
   * ports of the same loopback address, and a self-registered merchant must not reach them.
   */
  upstreams(env: NodeJS.ProcessEnv): Promise<DevnetUpstreams>;
  /** The built-in catalog against `upstreams`, paid to the manifest's merchants; `internal`: the upstreams served inside. */
  catalog(networks: readonly string[], upstreams: DevnetUpstreams, internal: ReadonlySet<'stock-data'>): Merchant[];
}

export function serviceDevnet(manifest: DevnetManifest): ServiceDevnet {
  return {
    relayers: DEVNET_ROLES.relayers.map((i) => devnetAccount(i)),
    deskAccount: devnetAccount(DEVNET_ROLES.stockDesk),
    receiptKey: devnetPrivateKey(DEVNET_RECEIPT_KEY_INDEX) as Hex,
    walletRpcUrl: manifest.networks[CAIP2.stockChain]?.rpcUrl,
    async upstreams(env) {
      const fixtureBase = envString(env, 'GATE402_CATALOG_UPSTREAM_BASE', '');
      if (fixtureBase) {
        const baseFor = (slug: string) => `${fixtureBase.replace(/\/$/, '')}/${slug}`;
        return { baseFor, allowlistEntry: originEntry(baseFor('catalog')), close: async () => {} };
      }
      const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
      const baseFor = (slug: string) => fixtures.baseUrlFor(slug);
      return { baseFor, allowlistEntry: originEntry(baseFor('catalog')), close: () => fixtures.close() };
    },
    catalog(networks, upstreams, internal) {
      // Against local fixture upstreams, so everything works offline; chain-stocks from the stock chain itself while
      // the stock API runs.
      const payees = manifest.accounts.merchants.map((m) => m.address);
      return builtinCatalog({
        payTo: (slug) => payees[[...slug].reduce((h, c) => h + c.charCodeAt(0), 0) % payees.length] as `0x${string}`,
        networks: [...networks],
        upstreamFor: (slug) => ({ kind: 'url', baseUrl: upstreams.baseFor(slug), secretHeaders: { 'x-api-key': DEVNET_UPSTREAM_SECRET } }),
        internal: new Set(internal),
        owner: devnetAccount(DEVNET_ROLES.deployer).address,
        now: Date.now(),
      });
    },
  };
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
