// The official peer: @x402/express's paywall serving the same route and price, verifying and settling through
// gate402's facilitator (an x402 facilitator like any other). Run by bench/gateway.ts.
import express from 'express';
import { HTTPFacilitatorClient } from '@x402/core/http';
import { ExactEvmScheme } from '@x402/evm/exact/server';
import { paymentMiddlewareFromConfig } from '@x402/express';

const [port, facilitatorUrl, network, asset, payTo, name, version] = process.argv.slice(2) as [string, string, string, string, string, string, string];
const app = express();
app.use(
  paymentMiddlewareFromConfig(
    {
      'GET /m/catjoke/joke': {
        accepts: { scheme: 'exact', network: network as `${string}:${string}`, payTo, price: { amount: '10000', asset, extra: { name, version } }, maxTimeoutSeconds: 300 },
        description: 'A random cat joke',
        mimeType: 'application/json',
      },
    },
    new HTTPFacilitatorClient({ url: facilitatorUrl }),
    [{ network: network as `${string}:${string}`, server: new ExactEvmScheme() }],
  ),
);
app.get('/m/catjoke/joke', (_req, res) => {
  res.json({ id: 7, setup: 'What do cats eat for breakfast?', punchline: 'Mice Krispies.' });
});
const server = app.listen(Number(port), '127.0.0.1', () => process.stdout.write('ready\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
