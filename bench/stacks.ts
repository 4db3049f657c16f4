/**
 * The servers a bench compares, each in a process of its own: gate402 (`gate402 start` on the devnet), the
 * official stack (the @x402/express seller and the reference facilitator), a bare uWebSockets.js hello-world, and
 * the local upstream both paid stacks forward to. Each listens on port 0 and prints the address the kernel gave it,
 * which is read from its output: no port is guessed ahead of the process that listens on it.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { request } from 'undici';
import { privateKeyToAccount } from 'viem/accounts';
import type { Address } from 'viem';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { DEVNET_UPSTREAM_SECRET } from '../src/cli/service.ts';
import { decodePaymentRequiredHeader } from '../src/protocol/x402/headers.ts';
import type { PaymentRequirements } from '../src/protocol/x402/types.ts';
import { gassedKey } from '../test/helpers/stock.ts';
import { listeningOn, startChild, stopChild } from './load.ts';

/** The route every comparison serves: gate402's built-in `catjoke` merchant, 0.01 of a stablecoin a call. */
export const ROUTE = '/m/catjoke/joke';

export interface Server {
  url: string;
  /** The processes that serve it, by role, for their memory figures. */
  processes: Record<string, ChildProcess>;
  stop(): Promise<void>;
}

/** `dir`: a directory of the server's own (its data), removed once it has stopped. */
function server(url: string, processes: Record<string, ChildProcess>, dir?: string): Server {
  return {
    url,
    processes,
    stop: async () => {
      await Promise.all(Object.values(processes).map(stopChild));
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

const tsx = (file: string, ...args: string[]) => ['--import', 'tsx', resolve(file), ...args];

/** gate402's catalog fixtures on their own: the upstream of both paid stacks, at `url` (an origin). */
export async function upstreamServer(): Promise<Server> {
  const { child, found } = await startChild(tsx('bench/peers/upstream.ts'), {}, listeningOn);
  return server(found, { upstream: child });
}

/** The gateway's and the facilitator's addresses, as `gate402 start` prints them once it is up. */
export function gate402Addresses(output: string): { gateway: string; facilitator: string } | undefined {
  if (!/gate402 is up/.test(output)) return undefined;
  const gateway = /^gateway: +(http:\/\/[^\s]+)/m.exec(output)?.[1];
  const facilitator = /^facilitator: +(http:\/\/[^\s]+)/m.exec(output)?.[1];
  return gateway && facilitator ? { gateway, facilitator } : undefined;
}

/**
 * `gate402 start` on the devnet of `manifestPath` (reusing its chains): facilitator and gateway on one engine, the
 * built-in catalog forwarding to `upstream` (else to fixtures in its own process), receipts polled every `pollMs`.
 * `env` adds to (or overrides) the service's settings.
 */
export async function startGate402(manifestPath: string, opts: { upstream?: string; pollMs: number; env?: Record<string, string> }): Promise<Server & { facilitatorUrl: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'gate402-bench-data-'));
  const { child, found } = await startChild(
    [resolve('src/cli/bin.mjs'), 'start', '--manifest', manifestPath],
    {
      GATE402_GATEWAY_PORT: '0',
      GATE402_FACILITATOR_PORT: '0',
      GATE402_DATA_DIR: join(dir, 'data'),
      GATE402_FACILITATOR_RATE_CAPACITY: '1000000',
      GATE402_FACILITATOR_RATE_PER_SECOND: '1000000',
      GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '1000000',
      GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '1000000',
      GATE402_RECEIPT_POLL_MS: String(opts.pollMs),
      ...(opts.upstream ? { GATE402_CATALOG_UPSTREAM_BASE: opts.upstream } : {}),
      ...opts.env,
    },
    gate402Addresses,
  ).catch((err: unknown) => {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  return { ...server(`${found.gateway}${ROUTE}`, { gate402: child }, dir), facilitatorUrl: found.facilitator };
}

/**
 * The official stack on `caip2`: the reference facilitator settling from a fresh relayer key of its own (gassed on
 * the devnet; viem's nonce manager unless `nonceManager` is false), and the @x402/express seller in front of it
 * charging the catjoke price to `payTo`.
 */
export async function startReference(n: NetworkEntry, caip2: string, opts: { payTo: Address; upstream: string; pollMs: number; nonceManager?: boolean }): Promise<Server & { relayer: Address }> {
  const relayerKey = await gassedKey(n, '1000');
  const { child: facilitator, found: facilitatorUrl } = await startChild(
    tsx('bench/peers/reference-facilitator.ts', n.rpcUrl, String(n.chainId), caip2, String(opts.pollMs)),
    { REFERENCE_RELAYER_KEY: relayerKey, REFERENCE_NONCE_MANAGER: opts.nonceManager === false ? 'off' : 'on' },
    listeningOn,
  );
  try {
    const { child: seller, found: sellerUrl } = await startChild(
      tsx('bench/peers/express-seller.ts', facilitatorUrl, caip2, n.stablecoin.address, opts.payTo, n.stablecoin.name, n.stablecoin.version, `${opts.upstream}/catjoke/joke`, DEVNET_UPSTREAM_SECRET),
      {},
      listeningOn,
    );
    return { ...server(`${sellerUrl}${ROUTE}`, { facilitator, seller }), relayer: privateKeyToAccount(relayerKey).address };
  } catch (err) {
    await stopChild(facilitator);
    throw err;
  }
}

/** The floor of the challenge comparison: uWebSockets.js answering a constant. */
export async function startBareUws(): Promise<Server> {
  const { child, found } = await startChild([resolve('bench/peers/bare-uws.mjs')], {}, listeningOn);
  return server(`${found}${ROUTE}`, { bare: child });
}

/** The x402 offer for `caip2` in the 402 that `url` answers without payment. */
export async function offerOf(url: string, caip2: string): Promise<PaymentRequirements> {
  const res = await request(url, { headersTimeout: 15_000, bodyTimeout: 15_000 });
  await res.body.dump();
  const required = decodePaymentRequiredHeader(String(res.headers['payment-required']));
  const offer = required.ok ? required.value.accepts.find((o) => o.network === caip2) : undefined;
  if (res.statusCode !== 402 || !offer) throw new Error(`${url} answered ${res.statusCode} with no ${caip2} offer`);
  return offer;
}

/** Starts servers side by side; each one that came up joins `started` (to be stopped), and any failure is thrown. */
export async function startAll<T extends readonly Promise<Server>[]>(started: Server[], starting: T): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(starting);
  for (const s of settled) if (s.status === 'fulfilled') started.push(s.value);
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<Server>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
}
