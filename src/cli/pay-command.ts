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
import { readManifest } from '../devnet/manifest.ts';
import { decodeReceipt } from '../protocol/mpp/receipt.ts';

const USAGE = `gate402 pay <url> [--protocol x402|mpp] [--network eip155:4663|eip155:8453|eip155:84532] [--method GET|POST] [--data JSON]

Pays for one request with the official clients (@x402/fetch with @x402/evm, or mppx) and prints the response and
its receipt. The key comes from GATE402_BUYER_KEY, or, on the devnet, from the manifest's first buyer.
`;

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
    },
  });
  const url = positionals[0];
  if (!url) throw new Error(USAGE);
  const manifest = existsSync(values.manifest) ? readManifest(values.manifest) : undefined;
  const key = (process.env.GATE402_BUYER_KEY ?? manifest?.accounts.buyers.find((b) => !b.gasless)?.privateKey) as Hex | undefined;
  if (!key) throw new Error('no buyer key: set GATE402_BUYER_KEY (or run on the devnet, whose manifest names demo buyers)');
  const account = privateKeyToAccount(key);
  const init: RequestInit = { method: values.method, ...(values.data ? { body: values.data, headers: { 'content-type': 'application/json' } } : {}) };

  let res: Response;
  if (values.protocol === 'mpp') {
    const n = manifest?.networks[values.network];
    const domain = n ? { name: n.stablecoin.name, version: n.stablecoin.version } : { name: process.env.GATE402_MPP_TOKEN_NAME ?? 'USD Coin', version: process.env.GATE402_MPP_TOKEN_VERSION ?? '2' };
    const mppx = Mppx.create({ methods: [evm({ account, authorization: domain })], polyfill: false });
    res = await mppx.fetch(url, init);
  } else if (values.protocol === 'x402') {
    const client = registerExactEvmScheme(
      x402Client.fromConfig({
        schemes: [],
        spendControls: false,
        paymentRequirementsSelector: (_v, offers) => offers.find((o) => o.network === values.network) ?? (offers[0] as (typeof offers)[number]),
      }),
      { signer: account },
    );
    res = await wrapFetchWithPayment(fetch, client)(url, init);
  } else {
    throw new Error(`--protocol must be x402 or mpp\n\n${USAGE}`);
  }

  process.stdout.write(`${res.status} ${res.statusText}\n`);
  for (const [k, v] of res.headers) process.stdout.write(`${k}: ${v}\n`);
  process.stdout.write(`\n${await res.text()}\n`);
  const paymentResponse = res.headers.get('payment-response');
  if (paymentResponse) process.stdout.write(`\nx402 settlement: ${JSON.stringify(decodePaymentResponseHeader(paymentResponse))}\n`);
  const receipt = res.headers.get('payment-receipt');
  if (receipt) {
    const decoded = decodeReceipt(receipt);
    process.stdout.write(`\nMPP receipt: ${JSON.stringify(decoded.ok ? decoded.value : decoded.error)}\n`);
  }
  if (!res.ok) process.exitCode = 1;
}
