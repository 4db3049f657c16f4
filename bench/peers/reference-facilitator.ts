// The reference facilitator: @x402/core's x402Facilitator with @x402/evm's exact scheme (facilitator side), its
// signer a viem wallet client of one relayer key, served over HTTP as the x402 examples serve it (express, POST
// /verify and /settle, GET /supported), in a process of its own. The relayer key comes in REFERENCE_RELAYER_KEY.
// Two choices keep the comparison fair rather than the reference weak: viem's nonce manager (the examples' bare
// `privateKeyToAccount(key)` has concurrent settlements from one key read the same pending nonce and collide;
// REFERENCE_NONCE_MANAGER=off runs it that way), and receipts polled as often as gate402 polls them in the same run.
// It listens on a port the kernel gives it and prints `listening on <origin>`.
//   node --import tsx bench/peers/reference-facilitator.ts <rpcUrl> <chainId> <network> <pollMs>
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Facilitator } from '@x402/core/facilitator';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/facilitator';
import { createWalletClient, http, publicActions, type Hex } from 'viem';
import { nonceManager, privateKeyToAccount } from 'viem/accounts';
import { chainFor } from '../../src/chain/clients.ts';

const [rpcUrl, chainId, network, pollMs] = process.argv.slice(2) as [string, string, `${string}:${string}`, string];
const key = process.env.REFERENCE_RELAYER_KEY as Hex | undefined;
if (!key) throw new Error('REFERENCE_RELAYER_KEY is not set');
const account = privateKeyToAccount(key, process.env.REFERENCE_NONCE_MANAGER === 'off' ? {} : { nonceManager });
const client = createWalletClient({ account, chain: chainFor(Number(chainId), rpcUrl), transport: http(rpcUrl, { timeout: 30_000 }), pollingInterval: Number(pollMs) }).extend(publicActions);

const signer = toFacilitatorEvmSigner({
  address: account.address,
  getCode: (args) => client.getCode(args),
  readContract: (args) => client.readContract({ ...args, args: args.args ?? [] } as Parameters<typeof client.readContract>[0]),
  verifyTypedData: (args) => client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0]),
  writeContract: (args) => client.writeContract({ ...args, args: args.args ?? [] } as Parameters<typeof client.writeContract>[0]),
  sendTransaction: (args) => client.sendTransaction(args),
  waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
});
const facilitator = new x402Facilitator().register(network, new ExactEvmScheme(signer));

const app = express();
app.use(express.json({ limit: '64kb' }));
app.get('/supported', (_req, res) => {
  res.json(facilitator.getSupported());
});
app.post('/verify', async (req, res) => {
  try {
    res.json(await facilitator.verify(req.body.paymentPayload, req.body.paymentRequirements));
  } catch (err) {
    res.status(500).json({ error: (err as Error).message });
  }
});
app.post('/settle', async (req, res) => {
  try {
    res.json(await facilitator.settle(req.body.paymentPayload, req.body.paymentRequirements));
  } catch (err) {
    res.status(500).json({ error: (err as Error).message });
  }
});
const listener = app.listen(0, '127.0.0.1', () => process.stdout.write(`listening on http://127.0.0.1:${(listener.address() as AddressInfo).port}\n`));
process.on('SIGTERM', () => listener.close(() => process.exit(0)));
