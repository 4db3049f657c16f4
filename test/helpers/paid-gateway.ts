import { x402Client } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { appendPaymentIdentifierToExtensions } from '@x402/extensions/payment-identifier';
import { wrapFetchWithPayment } from '@x402/fetch';
import { Mppx, evm } from 'mppx/client';
import { parseEther, toHex, type Address, type LocalAccount } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { DevnetManifest } from '../../src/devnet/manifest.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';
import { clientsFor, freshAccount, TEST_MANIFEST_PATH } from './devnet.ts';
import { spawnOwnDevnet } from './spawn-devnet.ts';
import { spawnFacilitator, type SpawnedFacilitator } from './spawn-facilitator.ts';

export interface PaidGateway {
  gw: SpawnedFacilitator;
  /** The relayer addresses of this gateway: fresh keys, given gas on every devnet chain. */
  relayers: Address[];
  relayerKeys: string;
}

/**
 * The real `gate402 gateway`, with the built-in catalog pointed at `upstreamOrigin` (each merchant at
 * `{upstreamOrigin}/{slug}`) and relayers of its own (fresh keys, unless `reuse` gives the keys of an earlier run,
 * with its data directory). Breakers are raised out of the way unless `env` says otherwise.
 */
export async function spawnPaidGateway(
  manifest: DevnetManifest,
  upstreamOrigin: string,
  env: Record<string, string> = {},
  reuse: { relayerKeys?: string; relayers?: Address[]; dataDir?: string; port?: number; manifestPath?: string } = {},
): Promise<PaidGateway> {
  let relayerKeys = reuse.relayerKeys;
  let relayers = reuse.relayers;
  if (relayerKeys === undefined || relayers === undefined) {
    const keys = [generatePrivateKey(), generatePrivateKey()];
    relayers = keys.map((k) => privateKeyToAccount(k).address);
    relayerKeys = keys.join(',');
    for (const n of Object.values(manifest.networks)) {
      for (const r of relayers) await rpcCall(n.rpcUrl, 'anvil_setBalance', [r, toHex(parseEther('10'))]);
    }
  }
  const gw = await spawnFacilitator({
    part: 'gateway',
    manifestPath: reuse.manifestPath ?? TEST_MANIFEST_PATH,
    ...(reuse.dataDir ? { dataDir: reuse.dataDir } : {}),
    ...(reuse.port ? { port: reuse.port } : {}),
    env: {
      GATE402_RELAYER_KEYS: relayerKeys,
      GATE402_CATALOG_UPSTREAM_BASE: upstreamOrigin,
      GATE402_UPSTREAM_ALLOWLIST: '127.0.0.1',
      GATE402_BREAKER_THRESHOLD: '1000',
      ...env,
    },
  });
  return { gw, relayers, relayerKeys };
}

/** The transactions the relayers have sent on `n` (their nonces). */
export async function relayerTxCount(n: NetworkEntry, relayers: Address[]): Promise<number> {
  const { pub } = clientsFor(n, freshAccount());
  let total = 0;
  for (const r of relayers) total += await pub.getTransactionCount({ address: r, blockTag: 'pending' });
  return total;
}

/** A fetch that lets the unpaid request through and keeps the paid retry's headers instead of sending it. */
function capturingFetch(names: string[], captured: Array<Record<string, string>>): typeof fetch {
  return async (input, init) => {
    const req = new Request(input as Parameters<typeof fetch>[0], init);
    const h: Record<string, string> = {};
    for (const name of names) {
      const v = req.headers.get(name);
      if (v) h[name] = v;
    }
    if (Object.keys(h).length === 0) return fetch(req);
    captured.push(h);
    return new Response('{"captured":true}', { status: 599, headers: { 'content-type': 'application/json' } });
  };
}

/**
 * @x402/fetch paying on `caip2` with @x402/evm; with `paymentId`, the x402 `payment-identifier` extension added with
 * the official helper, as the extension's README shows. `base` is the fetch it wraps.
 */
export function x402Fetch(payer: LocalAccount, caip2: string, paymentId?: string, base: typeof fetch = fetch): typeof fetch {
  const client = registerExactEvmScheme(
    x402Client.fromConfig({ schemes: [], spendControls: false, paymentRequirementsSelector: (_v, offers) => offers.find((o) => o.network === caip2) ?? (offers[0] as (typeof offers)[number]) }),
    { signer: payer },
  );
  if (paymentId !== undefined) {
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      paymentRequired.extensions ??= {};
      appendPaymentIdentifierToExtensions(paymentRequired.extensions, paymentId);
    });
  }
  return wrapFetchWithPayment(base, client);
}

/** A valid, never-sent PAYMENT-SIGNATURE for `url`, made by @x402/fetch + @x402/evm paying on `caip2` (with `paymentId`, carrying it). */
export async function x402Credential(url: string, payer: LocalAccount, caip2: string, paymentId?: string): Promise<string> {
  const captured: Array<Record<string, string>> = [];
  await x402Fetch(payer, caip2, paymentId, capturingFetch(['payment-signature'], captured))(url);
  const header = captured[0]?.['payment-signature'];
  if (!header) throw new Error(`@x402/fetch made no credential for ${url}`);
  return header;
}

/** A valid, never-sent `Authorization: Payment` credential for `url`, made by mppx (EIP-3009 on `n`). */
export async function mppCredential(url: string, payer: LocalAccount, n: NetworkEntry): Promise<string> {
  const captured: Array<Record<string, string>> = [];
  const mppx = Mppx.create({
    methods: [evm({ account: payer, authorization: { name: n.stablecoin.name, version: n.stablecoin.version } })],
    polyfill: false,
    fetch: capturingFetch(['authorization'], captured),
  });
  await mppx.fetch(url);
  const header = captured[0]?.authorization;
  if (!header) throw new Error(`mppx made no credential for ${url}`);
  return header;
}

/** Polls `check` until it holds (a busy machine is slow, never wrong). */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Registers a merchant of the test's own through the gateway's signed registration: a fresh wallet, so that its
 * balance moves only with this test's payments. Its upstream is `{upstreamOrigin}/{slug}`; its one route `data`
 * takes GET and POST at `priceUsd` (requiring a payment identifier with `requirePaymentId`). With `file`, the merchant
 * sells that uploaded file instead.
 */
export async function registerOwnMerchant(
  gatewayUrl: string,
  upstreamOrigin: string,
  opts: { slug: string; priceUsd: string; networks: string[]; file?: { fileName: string; contentType: string; content: Buffer }; requirePaymentId?: boolean },
): Promise<{ slug: string; payTo: Address }> {
  const { registrationTypedData } = await import('../../src/gateway/merchants/signature.ts');
  const owner = freshAccount();
  const registration = {
    action: 'register' as const,
    slug: opts.slug,
    name: 'Attacked shop',
    description: 'A merchant the adversarial tests pay',
    payTo: owner.address,
    networks: opts.networks,
    upstream: opts.file
      ? { kind: 'file' as const, fileName: opts.file.fileName, contentType: opts.file.contentType, contentBase64: opts.file.content.toString('base64') }
      : { kind: 'url' as const, baseUrl: `${upstreamOrigin}/${opts.slug}`, secretHeaders: { 'x-api-key': `${opts.slug}-secret` } },
    routes: [
      {
        route: 'data',
        methods: ['GET' as const, 'POST' as const],
        priceUsd: opts.priceUsd,
        summary: 'Data',
        description: 'Paid data',
        input: 'anything',
        ...(opts.requirePaymentId ? { requirePaymentId: true } : {}),
      },
    ],
    nonce: `n-${Math.random()}`,
    issuedAt: Math.floor(Date.now() / 1000),
  };
  const signature = await owner.signTypedData(registrationTypedData(registration as never));
  const res = await fetch(`${gatewayUrl}/api/merchants`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ registration, signature }) });
  const text = await res.text();
  if (res.status !== 200 && res.status !== 201) throw new Error(`registration refused: ${res.status} ${text}`);
  return { slug: opts.slug, payTo: owner.address };
}

/**
 * The real `gate402 gateway` on chains of the test's own (`spawnOwnDevnet`: for tests that change block times or
 * pause mining, which would stall every other file on the shared devnet), serving the built-in catalog from fixture
 * upstreams of its own, with `env` on top. Everything is stopped at the test's teardown, and the chains also when
 * the gateway fails to start (a throw at the top of a file ends it before tap runs its teardowns).
 */
export async function gatewayOnOwnDevnet(t: { teardown(fn: () => unknown): void }, prefix: string, env: Record<string, string> = {}) {
  const devnet = await spawnOwnDevnet(prefix);
  const stopDevnet = () => devnet.stop();
  t.teardown(stopDevnet);
  const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
  t.teardown(() => fixtures.close());
  const gw = await spawnFacilitator({
    part: 'gateway',
    manifestPath: devnet.manifestPath,
    env: { GATE402_CATALOG_UPSTREAM_BASE: new URL(fixtures.baseUrlFor('catjoke')).origin, ...env },
  }).catch(async (err: unknown) => {
    await stopDevnet();
    throw err;
  });
  t.teardown(() => gw.stop());
  return { devnet, fixtures, gw };
}
