/**
 * A buyer paying gate402's routes through payment channels with the official clients, unchanged: `@x402/fetch` over
 * an `x402Client` with only `@x402/evm`'s `batch-settlement` client registered (on one network), reading the chain
 * for channels it does not remember. Keeps the credentials it sent, so a test can replay or alter them; and a small
 * upstream that counts its calls and can be made to hang (a request stuck between the write-ahead and the serve).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { x402Client } from '@x402/core/client';
import { BatchSettlementEvmScheme } from '@x402/evm/batch-settlement/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import type { Test } from 'tap';
import type { LocalAccount } from 'viem';
import { CAIP2 } from '../../src/chain/canonical.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { readManifest } from '../../src/devnet/manifest.ts';
import { clientsFor, freshAccount, network } from './devnet.ts';
import { spawnOwnDevnet } from './spawn-devnet.ts';

export interface ChannelBuyer {
  pay: typeof fetch;
  /** A plain fetch (what a hostile client sends). */
  raw: typeof fetch;
  /** The PAYMENT-SIGNATURE headers the official client sent, in order. */
  sent: string[];
  scheme: BatchSettlementEvmScheme;
}

export function channelBuyer(n: NetworkEntry, payer: LocalAccount, opts: { depositMultiplier?: number } = {}): ChannelBuyer {
  const { pub } = clientsFor(n, payer);
  const signer = {
    address: payer.address,
    signTypedData: (message: Parameters<LocalAccount['signTypedData']>[0]) => payer.signTypedData(message),
    readContract: (args: Parameters<typeof pub.readContract>[0]) => pub.readContract(args),
  };
  const scheme = new BatchSettlementEvmScheme(signer as never, { depositPolicy: { depositMultiplier: opts.depositMultiplier ?? 5 } });
  // The devnet's tokens are not the default assets the spend controls allow: the test's buyer takes any (as `exact` tests do).
  const client = x402Client.fromConfig({ schemes: [], spendControls: false }).register(`eip155:${n.chainId}`, scheme);
  const sent: string[] = [];
  return { pay: wrapFetchWithPayment(recordingFetch(sent), client), raw: fetch, sent, scheme };
}

/** A fetch that keeps each PAYMENT-SIGNATURE it sends in `sent` (a test can replay or alter them). */
export function recordingFetch(sent: string[]): typeof fetch {
  return async (input, init) => {
    const req = new Request(input as Parameters<typeof fetch>[0], init);
    const credential = req.headers.get('payment-signature');
    if (credential) sent.push(credential);
    return fetch(req);
  };
}

/** The envelope of a sent credential, decoded. */
export function decodedCredential(header: string): { x402Version: number; accepted: Record<string, unknown>; payload: Record<string, unknown> } {
  return JSON.parse(Buffer.from(header, 'base64').toString('utf8'));
}

export function encodedCredential(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64');
}

/** An upstream for the built-in catalog (`{origin}/{slug}/{route}`): counts its calls; `hang` holds the answers back. */
export interface CountingUpstream {
  origin: string;
  calls: number;
  hang: boolean;
  /** Resolves when a call arrives while hanging. */
  hung(): Promise<void>;
  close(): Promise<void>;
}

export async function countingUpstream(): Promise<CountingUpstream> {
  let waiter: (() => void) | undefined;
  const held: Array<() => void> = [];
  const state = { calls: 0, hang: false };
  const server: Server = createServer((req, res) => {
    state.calls += 1;
    const answer = () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ joke: 'a cat walks into a channel', path: req.url }));
    };
    if (state.hang) {
      held.push(answer);
      waiter?.();
      return;
    }
    answer();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `http://127.0.0.1:${port}`,
    get calls() {
      return state.calls;
    },
    get hang() {
      return state.hang;
    },
    set hang(v: boolean) {
      state.hang = v;
    },
    hung: () => new Promise<void>((resolve) => (waiter = resolve)),
    close: () =>
      new Promise<void>((resolve) => {
        for (const a of held.splice(0)) a();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A file's chains of its own (read on its Base chain: `n`, `pub`) and a counting upstream, both stopped when `t` ends. */
export async function ownChannelChains(t: Test, name: string) {
  const devnet = await spawnOwnDevnet(name);
  t.teardown(() => devnet.stop());
  const manifest = readManifest(devnet.manifestPath);
  const n = network(manifest, CAIP2.base);
  const { pub } = clientsFor(n, freshAccount());
  const upstream = await countingUpstream();
  t.teardown(() => upstream.close());
  return { devnet, manifest, n, pub, upstream };
}
