import t from 'tap';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { maxUint256, parseEther, parseUnits, toHex, type Address, type Hex } from 'viem';
import { CAIP2, EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS } from '../src/chain/canonical.ts';
import { exactPermit2ProxyArtifact, stablecoinArtifact } from '../src/devnet/contracts/artifacts/index.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { clientsFor, freshAccount, network, tester, testDevnet } from './helpers/devnet.ts';

// Payloads made by the official x402 client scheme settle on our contracts: they are signature-compatible
// with the canonical ones.
const manifest = testDevnet();
const tokenAbi = stablecoinArtifact.abi;

t.test('an @x402/evm EIP-3009 payload for eip155:8453 settles', async (t) => {
  const n = network(manifest, CAIP2.base);
  const { pub, wallet } = clientsFor(n, tester('interop'));
  const payer = freshAccount();
  const payTo = freshAccount().address;
  await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: n.stablecoin.address, abi: tokenAbi, functionName: 'mint', args: [payer.address, parseUnits('1', 6)] }) });
  const client = new ExactEvmScheme(payer);
  const result = await client.createPaymentPayload(2, {
    scheme: 'exact',
    network: CAIP2.base,
    amount: '10000',
    asset: n.stablecoin.address,
    payTo,
    maxTimeoutSeconds: 120,
    extra: { name: n.stablecoin.name, version: n.stablecoin.version },
  });
  const payload = result.payload as { signature: Hex; authorization: { from: Address; to: Address; value: string; validAfter: string; validBefore: string; nonce: Hex } };
  const a = payload.authorization;
  t.equal(a.to, payTo);
  const hash = await wallet.writeContract({
    address: n.stablecoin.address,
    abi: tokenAbi,
    functionName: 'transferWithAuthorization',
    args: [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, payload.signature],
  });
  t.equal((await pub.waitForTransactionReceipt({ hash })).status, 'success');
  t.equal(await pub.readContract({ address: n.stablecoin.address, abi: tokenAbi, functionName: 'balanceOf', args: [payTo] }), 10_000n, 'exactly the amount arrived');
  t.equal(await pub.readContract({ address: n.stablecoin.address, abi: tokenAbi, functionName: 'balanceOf', args: [payer.address] }), 990_000n);
});

t.test('an @x402/evm Permit2 payload for eip155:4663 settles through the proxy', async (t) => {
  const n = network(manifest, CAIP2.stockChain);
  const { pub, wallet } = clientsFor(n, tester('interop'));
  const payer = freshAccount();
  const payTo = freshAccount().address;
  await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: n.stablecoin.address, abi: tokenAbi, functionName: 'mint', args: [payer.address, parseUnits('1', 6)] }) });
  await rpcCall(n.rpcUrl, 'anvil_setBalance', [payer.address, toHex(parseEther('1'))]);
  const own = clientsFor(n, payer);
  await pub.waitForTransactionReceipt({ hash: await own.wallet.writeContract({ address: n.stablecoin.address, abi: tokenAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] }) });

  const client = new ExactEvmScheme(payer);
  const result = await client.createPaymentPayload(2, {
    scheme: 'exact',
    network: CAIP2.stockChain,
    amount: '20000',
    asset: n.stablecoin.address,
    payTo,
    maxTimeoutSeconds: 120,
    extra: { assetTransferMethod: 'permit2', spender: EXACT_PERMIT2_PROXY_ADDRESS },
  });
  const payload = result.payload as {
    signature: Hex;
    permit2Authorization: { from: Address; permitted: { token: Address; amount: string }; spender: Address; nonce: string; deadline: string; witness: { to: Address; validAfter: string } };
  };
  const p = payload.permit2Authorization;
  t.equal(p.spender, EXACT_PERMIT2_PROXY_ADDRESS, 'the client names the canonical proxy as spender');
  t.equal(p.witness.to, payTo);
  const hash = await wallet.writeContract({
    address: EXACT_PERMIT2_PROXY_ADDRESS,
    abi: exactPermit2ProxyArtifact.abi,
    functionName: 'settle',
    args: [
      { permitted: { token: p.permitted.token, amount: BigInt(p.permitted.amount) }, nonce: BigInt(p.nonce), deadline: BigInt(p.deadline) },
      p.from,
      { to: p.witness.to, validAfter: BigInt(p.witness.validAfter) },
      payload.signature,
    ],
  });
  t.equal((await pub.waitForTransactionReceipt({ hash })).status, 'success');
  t.equal(await pub.readContract({ address: n.stablecoin.address, abi: tokenAbi, functionName: 'balanceOf', args: [payTo] }), 20_000n, 'exactly the amount arrived');
});
