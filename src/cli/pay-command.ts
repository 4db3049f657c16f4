import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { x402Client } from '@x402/core/client';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { Mppx, evm } from 'mppx/client';
import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../chain/canonical.ts';
import type { DevnetManifest } from '../devnet/manifest.ts';
import { aboveMax, describeOffer, parseMaxUsd, priceUsd, type ChosenOffer } from './pay-offer.ts';

const USAGE = `gate402 pay <url> [--protocol x402|mpp] [--network eip155:4663|eip155:8453|eip155:84532] [--method GET|POST] [--data JSON]
               [--dry-run] [--max <USD>] [--scheme exact|batch-settlement [--refund] [--channels FILE] [--deposit-multiplier N]]

Pays for one request with the official clients (@x402/fetch with @x402/evm, or mppx) and prints the response and
its receipt. The key comes from GATE402_BUYER_KEY, or, on the devnet, from the manifest's first buyer.

  --dry-run     print the offer it would pay (price, token, network, payee) and pay nothing
  --max <USD>   refuse to pay more than this (e.g. 0.05): a higher price pays nothing and exits 3
  --scheme batch-settlement
                pay through a payment channel (x402 only): the first call deposits (gasless, --deposit-multiplier
                times the price; default 5), later calls send signed vouchers and no transaction. The channels' state
                is kept in --channels (default: var/channels.json); the chain is read at the manifest's RPC or
                GATE402_BUYER_RPC_URL
  --refund      (with --scheme batch-settlement) ask for the channel's unspent deposit back, instead of paying
`;

/** Exit status of a call refused by `--max`: nothing was paid. */
export const OVER_MAX_EXIT = 3;

/** Why the call stopped before anything was signed: a dry run, or a price above `--max`. */
type Stop = { why: 'dry-run' | 'over-max'; offer: ChosenOffer };

/** A buyer, for trying the marketplace: never part of the server. */
export async function runPayCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      protocol: { type: 'string', default: 'x402' },
      network: { type: 'string', default: CAIP2.stockChain },
      method: { type: 'string', default: 'GET' },
      data: { type: 'string' },
      manifest: { type: 'string', default: process.env.GATE402_MANIFEST ?? 'var/devnet.json' },
      'dry-run': { type: 'boolean', default: false },
      max: { type: 'string' },
      scheme: { type: 'string', default: 'exact' },
      refund: { type: 'boolean', default: false },
      channels: { type: 'string', default: process.env.GATE402_BUYER_CHANNELS ?? 'var/channels.json' },
      'deposit-multiplier': { type: 'string' },
    },
  });
  const url = positionals[0];
  if (!url) throw new Error(USAGE);
  if (values.protocol !== 'x402' && values.protocol !== 'mpp') throw new Error(`--protocol must be x402 or mpp\n\n${USAGE}`);
  if (values.scheme !== 'exact' && values.scheme !== 'batch-settlement') throw new Error(`--scheme must be exact or batch-settlement\n\n${USAGE}`);
  const channel = values.scheme === 'batch-settlement';
  if (channel && values.protocol !== 'x402') throw new Error('--scheme batch-settlement is an x402 scheme: it cannot go with --protocol mpp');
  if (values.refund && !channel) throw new Error('--refund asks a payment channel for its deposit back: it goes with --scheme batch-settlement');
  const multiplier = values['deposit-multiplier'] === undefined ? undefined : Number(values['deposit-multiplier']);
  if (multiplier !== undefined && !(Number.isInteger(multiplier) && multiplier >= 3 && multiplier <= 100_000))
    throw new Error('--deposit-multiplier must be a whole number from 3 (the least the official client takes) to 100000');
  const max = values.max === undefined ? undefined : parseMaxUsd(values.max);
  if (values.max !== undefined && max === undefined) throw new Error(`--max must be a USD amount with at most 6 decimals, e.g. 0.05; got '${values.max}'`);
  // The manifest's reader validates it with JSON Schema: loaded only on the devnet, where there is a manifest to read.
  const manifest: DevnetManifest | undefined = existsSync(values.manifest) ? (await import('../devnet/manifest.ts')).readManifest(values.manifest) : undefined;
  const key = (process.env.GATE402_BUYER_KEY ?? manifest?.accounts.buyers.find((b) => !b.gasless)?.privateKey) as Hex | undefined;
  if (!key) throw new Error('no buyer key: set GATE402_BUYER_KEY (or run on the devnet, whose manifest names demo buyers)');
  const account = privateKeyToAccount(key);
  const init: RequestInit = { method: values.method, ...(values.data ? { body: values.data, headers: { 'content-type': 'application/json' } } : {}) };
  const decimalsOf = (network: string, asset: string): number => {
    const n = manifest?.networks[network];
    return n && n.stablecoin.address.toLowerCase() === asset.toLowerCase() ? n.stablecoin.decimals : 6;
  };

  // Decided on the offer the official client chose, before it signs: a dry run or a price over --max stops there.
  let stop: Stop | undefined;
  const decide = (offer: ChosenOffer): Stop | undefined => {
    if (values['dry-run']) stop = { why: 'dry-run', offer };
    else if (max !== undefined && aboveMax(offer, max)) stop = { why: 'over-max', offer };
    return stop;
  };

  let res: Response | undefined;
  try {
    if (values.protocol === 'mpp') {
      const n = manifest?.networks[values.network];
      const domain = n ? { name: n.stablecoin.name, version: n.stablecoin.version } : { name: process.env.GATE402_MPP_TOKEN_NAME ?? 'USD Coin', version: process.env.GATE402_MPP_TOKEN_VERSION ?? '2' };
      const mppx = Mppx.create({
        methods: [evm({ account, authorization: domain })],
        polyfill: false,
        onChallenge: async (challenge, { createCredential }) => {
          const request = challenge.request as { amount?: unknown; currency?: unknown; recipient?: unknown; methodDetails?: { chainId?: unknown; decimals?: unknown } };
          const offer: ChosenOffer = {
            protocol: 'mpp',
            network: `eip155:${String(request.methodDetails?.chainId ?? '?')}`,
            asset: String(request.currency ?? ''),
            payTo: String(request.recipient ?? ''),
            amount: BigInt(String(request.amount ?? '0')),
            decimals: typeof request.methodDetails?.decimals === 'number' ? request.methodDetails.decimals : 6,
          };
          if (decide(offer)) throw new Error(`stopped before paying (${stop?.why})`);
          return createCredential();
        },
      });
      res = await mppx.fetch(url, init);
    } else {
      const base = x402Client.fromConfig({
        schemes: [],
        spendControls: false,
        paymentRequirementsSelector: (_v, offers) => offers.find((o) => o.network === values.network) ?? (offers[0] as (typeof offers)[number]),
      });
      let client: x402Client;
      if (channel) {
        const rpcUrl = process.env.GATE402_BUYER_RPC_URL ?? manifest?.networks[values.network]?.rpcUrl;
        if (!rpcUrl) throw new Error(`no RPC for ${values.network}: set GATE402_BUYER_RPC_URL (the channel client reads the chain)`);
        const { channelClient } = await import('./pay-channel.ts');
        const scheme = channelClient({ account, rpcUrl, stateFile: values.channels, ...(multiplier !== undefined ? { depositMultiplier: multiplier } : {}) });
        if (values.refund) {
          const refunded = await scheme.refund(url);
          process.stdout.write(`refund: ${JSON.stringify(refunded)}\n`);
          if (!refunded.success) process.exitCode = 1;
          return;
        }
        client = base.register(values.network as `${string}:${string}`, scheme);
      } else client = registerExactEvmScheme(base, { signer: account });
      client.onBeforePaymentCreation(async ({ selectedRequirements: r }) => {
        const offer: ChosenOffer = { protocol: 'x402', network: r.network, asset: r.asset, payTo: r.payTo, amount: BigInt(r.amount), decimals: decimalsOf(r.network, r.asset) };
        return decide(offer) ? { abort: true, reason: stop?.why ?? 'stopped' } : undefined;
      });
      res = await wrapFetchWithPayment(fetch, client)(url, init);
    }
  } catch (err) {
    if (stop === undefined) throw err;
  }

  if (stop?.why === 'dry-run') {
    process.stdout.write(`${describeOffer(stop.offer)}\ndry run: nothing was paid\n`);
    return;
  }
  if (stop?.why === 'over-max') {
    process.stderr.write(`gate402: the price ${priceUsd(stop.offer)} USD is above --max ${values.max} USD; nothing was paid\n${describeOffer(stop.offer)}\n`);
    process.exitCode = OVER_MAX_EXIT;
    return;
  }
  if (!res) throw new Error('no response');
  process.stdout.write(`${res.status} ${res.statusText}\n`);
  for (const [k, v] of res.headers) process.stdout.write(`${k}: ${v}\n`);
  process.stdout.write(`\n${await res.text()}\n`);
  const paymentResponse = res.headers.get('payment-response');
  if (paymentResponse) process.stdout.write(`\nx402 settlement: ${JSON.stringify(decodePaymentResponseHeader(paymentResponse))}\n`);
  const receipt = res.headers.get('payment-receipt');
  if (receipt) {
    // Its decoder compiles JSON Schemas when loaded: loaded only for an answer that carries a receipt.
    const decoded = (await import('../protocol/mpp/receipt.ts')).decodeReceipt(receipt);
    process.stdout.write(`\nMPP receipt: ${JSON.stringify(decoded.ok ? decoded.value : decoded.error)}\n`);
  }
  if (!res.ok) process.exitCode = 1;
}
