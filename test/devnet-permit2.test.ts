import t from 'tap';
import { encodeAbiParameters, keccak256, maxUint256, parseEther, parseUnits, toBytes, toHex } from 'viem';
import { CAIP2, EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS } from '../src/chain/canonical.ts';
import { permit2Artifact, stablecoinArtifact } from '../src/devnet/contracts/artifacts/index.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { clientsFor, freshAccount, network, tester, testDevnet } from './helpers/devnet.ts';
import { exactPermit2ProxyAbi, randomNonce, settleArgs, signWitnessPermit, type WitnessPermit } from './helpers/permit2.ts';

const manifest = testDevnet();
const n = network(manifest, CAIP2.stockChain);
const token = n.stablecoin.address;
const { pub, wallet } = clientsFor(n, tester('permit2'));
const proxyAbi = exactPermit2ProxyAbi;
const tokenAbi = stablecoinArtifact.abi;
const chainTime = async () => (await pub.getBlock()).timestamp;
const balance = (who: `0x${string}`) => pub.readContract({ address: token, abi: tokenAbi, functionName: 'balanceOf', args: [who] });

/** A payer with stablecoin B and, unless told otherwise, its one Permit2 approval. */
async function fundedPayer(approve = true) {
  const payer = freshAccount();
  await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: token, abi: tokenAbi, functionName: 'mint', args: [payer.address, parseUnits('50', 6)] }) });
  if (approve) {
    await rpcCall(n.rpcUrl, 'anvil_setBalance', [payer.address, toHex(parseEther('1'))]);
    const own = clientsFor(n, payer);
    await pub.waitForTransactionReceipt({ hash: await own.wallet.writeContract({ address: token, abi: tokenAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] }) });
  }
  return payer;
}

async function permitFor(payerTo: `0x${string}`, overrides: Partial<WitnessPermit> = {}): Promise<WitnessPermit> {
  return {
    permitted: { token, amount: 2_500_000n },
    spender: EXACT_PERMIT2_PROXY_ADDRESS,
    nonce: randomNonce(),
    deadline: (await chainTime()) + 300n,
    witness: { to: payerTo, validAfter: 0n },
    ...overrides,
  };
}

t.test('the canonical addresses hold the contracts', async (t) => {
  t.equal(n.permit2, PERMIT2_ADDRESS);
  t.equal(n.exactPermit2Proxy, EXACT_PERMIT2_PROXY_ADDRESS);
  t.equal(await pub.readContract({ address: EXACT_PERMIT2_PROXY_ADDRESS, abi: proxyAbi, functionName: 'PERMIT2' }), PERMIT2_ADDRESS);
  t.equal(await pub.readContract({ address: EXACT_PERMIT2_PROXY_ADDRESS, abi: proxyAbi, functionName: 'WITNESS_TYPEHASH' }), '0xd97b3239a7f32295517bd14cb074edfdd188dfe5eb42f802bb26d4fd1eb12c37');
  const expectedDomain = await pub.readContract({ address: PERMIT2_ADDRESS, abi: permit2Artifact.abi, functionName: 'DOMAIN_SEPARATOR' });
  const domainTypeHash = keccak256(toBytes('EIP712Domain(string name,uint256 chainId,address verifyingContract)'));
  const expected = keccak256(
    encodeAbiParameters([{ type: 'bytes32' }, { type: 'bytes32' }, { type: 'uint256' }, { type: 'address' }], [domainTypeHash, keccak256(toBytes('Permit2')), BigInt(n.chainId), PERMIT2_ADDRESS]),
  );
  t.equal(expectedDomain, expected, 'DOMAIN_SEPARATOR is computed for the running chain at the canonical address');
});

t.test('a witness transfer through the proxy moves exactly permitted.amount to witness.to', async (t) => {
  const payer = await fundedPayer();
  const merchant = freshAccount().address;
  const p = await permitFor(merchant);
  const signature = await signWitnessPermit(payer, n.chainId, p);
  const before = await balance(payer.address);
  const receipt = await pub.waitForTransactionReceipt({
    hash: await wallet.writeContract({ address: EXACT_PERMIT2_PROXY_ADDRESS, abi: proxyAbi, functionName: 'settle', args: settleArgs(payer.address, p, signature) }),
  });
  t.equal(receipt.status, 'success');
  t.equal(await balance(payer.address), before - p.permitted.amount, 'payer paid exactly the amount');
  t.equal(await balance(merchant), p.permitted.amount, 'merchant received exactly the amount');
  const word = await pub.readContract({ address: PERMIT2_ADDRESS, abi: permit2Artifact.abi, functionName: 'nonceBitmap', args: [payer.address, p.nonce >> 8n] });
  t.equal((word >> (p.nonce & 0xffn)) & 1n, 1n, 'the nonce bit is set in the bitmap');

  await t.rejects(
    pub.simulateContract({ account: wallet.account, address: EXACT_PERMIT2_PROXY_ADDRESS, abi: proxyAbi, functionName: 'settle', args: settleArgs(payer.address, p, signature) }),
    /InvalidNonce/,
    'reusing the nonce reverts',
  );
});

t.test('bad permits revert and move nothing', async (t) => {
  const payer = await fundedPayer();
  const merchant = freshAccount().address;
  const now = await chainTime();
  const cases: Array<[string, Partial<WitnessPermit>, RegExp]> = [
    ['a passed deadline', { deadline: now - 1n }, /SignatureExpired/],
    ['validAfter in the future', { witness: { to: merchant, validAfter: now + 3600n } }, /PaymentTooEarly/],
    ['a wrong spender', { spender: freshAccount().address }, /InvalidSigner|InvalidSignature/],
  ];
  for (const [what, overrides, error] of cases) {
    const p = await permitFor(merchant, overrides);
    const signature = await signWitnessPermit(payer, n.chainId, p);
    await t.rejects(
      pub.simulateContract({ account: wallet.account, address: EXACT_PERMIT2_PROXY_ADDRESS, abi: proxyAbi, functionName: 'settle', args: settleArgs(payer.address, p, signature) }),
      error,
      `${what} reverts`,
    );
  }

  const unapproved = await fundedPayer(false);
  const p = await permitFor(merchant);
  const signature = await signWitnessPermit(unapproved, n.chainId, p);
  await t.rejects(
    pub.simulateContract({ account: wallet.account, address: EXACT_PERMIT2_PROXY_ADDRESS, abi: proxyAbi, functionName: 'settle', args: settleArgs(unapproved.address, p, signature) }),
    /revert/i,
    'a payer without Permit2 approval reverts',
  );

  const invalidated = await permitFor(merchant);
  const own = clientsFor(n, payer);
  await pub.waitForTransactionReceipt({
    hash: await own.wallet.writeContract({
      address: PERMIT2_ADDRESS,
      abi: permit2Artifact.abi,
      functionName: 'invalidateUnorderedNonces',
      args: [invalidated.nonce >> 8n, 1n << (invalidated.nonce & 0xffn)],
    }),
  });
  const sig = await signWitnessPermit(payer, n.chainId, invalidated);
  await t.rejects(
    pub.simulateContract({ account: wallet.account, address: EXACT_PERMIT2_PROXY_ADDRESS, abi: proxyAbi, functionName: 'settle', args: settleArgs(payer.address, invalidated, sig) }),
    /InvalidNonce/,
    'an invalidated nonce reverts',
  );

  t.equal(await balance(merchant), 0n, 'nothing reached the merchant');
});
