// The official seller: @x402/express's paymentMiddleware on an x402ResourceServer with @x402/evm's exact scheme,
// serving the same route and price as gate402's catjoke merchant. It verifies and settles through the reference
// facilitator (bench/peers/reference-facilitator.ts) over HTTP, and a paid request is served from the same local
// upstream gate402 forwards to. It listens on a port the kernel gives it and prints `listening on <origin>`. Run by the
// challenge and paid benches:
//   node --import tsx bench/peers/express-seller.ts <facilitatorUrl> <network> <asset> <payTo> <name> <version> <upstreamUrl> <upstreamSecret>
import type { AddressInfo } from 'node:net';
import express from 'express';
import { request } from 'undici';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { ExactEvmScheme } from '@x402/evm/exact/server';
import { paymentMiddleware } from '@x402/express';

const [facilitatorUrl, network, asset, payTo, name, version, upstreamUrl, upstreamSecret] = process.argv.slice(2) as [string, `${string}:${string}`, string, string, string, string, string, string];
const server = new x402ResourceServer(new HTTPFacilitatorClient({ url: facilitatorUrl })).register(network, new ExactEvmScheme());
const app = express();
app.use(
  paymentMiddleware(
    {
      'GET /m/catjoke/joke': {
        accepts: { scheme: 'exact', network, payTo, price: { amount: '10000', asset, extra: { name, version } }, maxTimeoutSeconds: 300 },
        description: 'A random cat joke',
        mimeType: 'application/json',
      },
    },
    server,
  ),
);
app.get('/m/catjoke/joke', async (_req, res) => {
  try {
    const upstream = await request(upstreamUrl, { headers: { 'x-api-key': upstreamSecret }, headersTimeout: 15_000, bodyTimeout: 15_000 });
    res
      .status(upstream.statusCode)
      .type('application/json')
      .send(await upstream.body.text());
  } catch {
    res.status(502).json({ error: 'upstream unreachable' });
  }
});
const listener = app.listen(0, '127.0.0.1', () => process.stdout.write(`listening on http://127.0.0.1:${(listener.address() as AddressInfo).port}\n`));
process.on('SIGTERM', () => listener.close(() => process.exit(0)));
