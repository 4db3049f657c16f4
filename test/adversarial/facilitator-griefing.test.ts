/**
 * Gas griefing at the open facilitator: payments that move nothing of value (zero, to the payer itself, into our own
 * relayers or contracts) and a payer beyond its quota are refused before any chain is asked anything. Checked from
 * outside: a counting JSON-RPC proxy sits between the facilitator and the devnet, and the relayers' nonces and gas
 * are read from the chain directly.
 */
import t, { type Test } from 'tap';
import { parseEther, parseUnits, toHex, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2, EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS, SUPPORTED_NETWORKS } from '../../src/chain/canonical.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import type { PaymentPayload, PaymentRequirements } from '../../src/protocol/x402/types.ts';
import { clientsFor, freshAccount, network, tester, testDevnet, TEST_MANIFEST_PATH } from '../helpers/devnet.ts';
import { signTransferAuthorization } from '../helpers/eip3009.ts';
import { fundedPayer, officialPayment, postJson, requirementsFor, stableBalance } from '../helpers/payments.ts';
import { randomNonce, signWitnessPermit } from '../helpers/permit2.ts';
import { countingRpcProxy } from '../helpers/rpc-counter.ts';
import { spawnFacilitator } from '../helpers/spawn-facilitator.ts';

const manifest = testDevnet();
const funder = tester('attackFacilitator');
const relayerKeys = [generatePrivateKey(), generatePrivateKey()];
const relayers = relayerKeys.map((k) => privateKeyToAccount(k));
for (const caip2 of SUPPORTED_NETWORKS) {
  for (const r of relayers) await rpcCall(network(manifest, caip2).rpcUrl, 'anvil_setBalance', [r.address, toHex(parseEther('10'))]);
}
// Base Sepolia's stablecoin is moved, in this facilitator's copy of the manifest, to an address without code.
const undeployedAsset = freshAccount().address;
const rpc = await countingRpcProxy(TEST_MANIFEST_PATH, (m) => {
  const sepolia = m.networks[CAIP2.baseSepolia];
  if (sepolia) sepolia.stablecoin = { ...sepolia.stablecoin, address: undeployedAsset };
});
t.teardown(() => rpc.close());
const PAYER_QUOTA = 3;
const fac = await spawnFacilitator({
  manifestPath: rpc.manifestPath,
  env: {
    GATE402_RELAYER_KEYS: relayerKeys.join(','),
    GATE402_FACILITATOR_RATE_CAPACITY: '100000',
    GATE402_FACILITATOR_RATE_PER_SECOND: '100000',
    GATE402_FACILITATOR_PAYER_RATE_CAPACITY: String(PAYER_QUOTA),
    GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '0.0001',
    // No background balance reads while a test counts RPC calls.
    GATE402_RELAYER_WATCH_MS: '3600000',
  },
});
t.teardown(() => fac.stop());

const now = () => BigInt(Math.floor(Date.now() / 1000));
const base = network(manifest, CAIP2.base);
const stock = network(manifest, CAIP2.stockChain);
const baseDomain = { name: base.stablecoin.name, version: base.stablecoin.version, chainId: base.chainId, verifyingContract: base.stablecoin.address };

/** What the relayers have done on every chain: nonces (pending) and native balances, read past the proxy. */
async function relayerState(): Promise<string[]> {
  const rows = await Promise.all(
    SUPPORTED_NETWORKS.flatMap((caip2) => {
      const { pub } = clientsFor(network(manifest, caip2), funder);
      return relayers.map(async (r) => `${caip2} ${r.address} nonce=${await pub.getTransactionCount({ address: r.address, blockTag: 'pending' })} wei=${await pub.getBalance({ address: r.address })}`);
    }),
  );
  return rows;
}

/** An EIP-3009 authorization on Base signed by `payer`, with requirements that match it exactly. */
async function eip3009(payer: ReturnType<typeof freshAccount>, to: Address, value: bigint): Promise<{ payment: PaymentPayload; req: PaymentRequirements }> {
  const req = requirementsFor(CAIP2.base, base, to, value.toString());
  const s = await signTransferAuthorization(payer, baseDomain, { to, value, validAfter: 0n, validBefore: now() + 120n });
  const a = s.authorization;
  const payment = {
    x402Version: 2,
    accepted: req,
    payload: { signature: s.signature, authorization: { from: a.from, to: a.to, value: a.value.toString(), validAfter: '0', validBefore: a.validBefore.toString(), nonce: a.nonce } },
  } as PaymentPayload;
  return { payment, req };
}

/** A Permit2 witness transfer on the stock chain signed by `payer`, with requirements that match it exactly. */
async function permit2(payer: ReturnType<typeof freshAccount>, to: Address, amount: bigint): Promise<{ payment: PaymentPayload; req: PaymentRequirements }> {
  const req = requirementsFor(CAIP2.stockChain, stock, to, amount.toString());
  const permit = { permitted: { token: stock.stablecoin.address, amount }, spender: EXACT_PERMIT2_PROXY_ADDRESS, nonce: randomNonce(), deadline: now() + 120n, witness: { to, validAfter: 0n } };
  const signature = await signWitnessPermit(payer, stock.chainId, permit);
  const payment = {
    x402Version: 2,
    accepted: req,
    payload: {
      signature,
      permit2Authorization: {
        from: payer.address,
        permitted: { token: stock.stablecoin.address, amount: amount.toString() },
        spender: EXACT_PERMIT2_PROXY_ADDRESS,
        nonce: permit.nonce.toString(),
        deadline: permit.deadline.toString(),
        witness: { to, validAfter: '0' },
      },
    },
  } as PaymentPayload;
  return { payment, req };
}

type Answer = { status: number; json: Record<string, unknown> };
const call = async (route: 'verify' | 'settle', p: { payment: PaymentPayload; req: PaymentRequirements }): Promise<Answer> => {
  const a = await postJson(`${fac.url}/${route}`, { x402Version: 2, paymentPayload: p.payment, paymentRequirements: p.req });
  return { status: a.status, json: a.json as Record<string, unknown> };
};

/**
 * Sends each payment to /verify once and to /settle `times` times; every answer must be a 200 refusal with `reason`,
 * and neither the chain (through the proxy) nor the relayers may have been touched.
 */
async function refusedForFree(t: Test, what: string, p: { payment: PaymentPayload; req: PaymentRequirements }, reason: string, times = 10): Promise<void> {
  const rpcBefore = rpc.total();
  const relayersBefore = await relayerState();
  const verified = await call('verify', p);
  t.same([verified.status, verified.json.isValid, verified.json.invalidReason], [200, false, reason], `${what}: /verify refuses with ${reason} (${JSON.stringify(verified.json)})`);
  const settled = await Promise.all(Array.from({ length: times }, () => call('settle', p)));
  const wrong = settled.filter((a) => a.status !== 200 || a.json.success !== false || a.json.errorReason !== reason || a.json.transaction !== '');
  t.same(wrong, [], `${what}: ${times} /settle answer 200 success:false ${reason}, no transaction`);
  t.equal(rpc.total(), rpcBefore, `${what}: no RPC call at all (${JSON.stringify([...rpc.calls()])})`);
  t.same(await relayerState(), relayersBefore, `${what}: no relayer transaction, no relayer gas spent`);
}

t.test('a zero-value authorization from a wallet to itself is refused, for free, as often as it comes', async (t) => {
  const wallet = freshAccount();
  await refusedForFree(t, 'zero to self', await eip3009(wallet, wallet.address, 0n), 'invalid_exact_evm_payload_authorization_value_mismatch', 20);
  const other = freshAccount();
  await refusedForFree(t, 'zero to someone else', await eip3009(other, freshAccount().address, 0n), 'invalid_exact_evm_payload_authorization_value_mismatch');
  await refusedForFree(t, 'Permit2 zero', await permit2(other, freshAccount().address, 0n), 'permit2_amount_mismatch');
});

t.test('a payer paying itself is refused before any RPC', async (t) => {
  const wallet = freshAccount();
  await refusedForFree(t, 'EIP-3009 self-payment', await eip3009(wallet, wallet.address, 10_000n), 'payer_is_payee');
  await refusedForFree(t, 'Permit2 self-payment', await permit2(wallet, wallet.address, 10_000n), 'payer_is_payee');
});

t.test('our own relayers are never a payee', async (t) => {
  for (const r of relayers) {
    await refusedForFree(t, `EIP-3009 to relayer ${r.address}`, await eip3009(freshAccount(), r.address, 10_000n), 'payee_not_allowed');
  }
  await refusedForFree(t, 'Permit2 to a relayer', await permit2(freshAccount(), relayers[0]!.address, 10_000n), 'payee_not_allowed');
});

t.test('contracts we know are never a payee', async (t) => {
  const known: Array<[string, Address]> = [
    ['the token itself', base.stablecoin.address],
    ['Permit2', PERMIT2_ADDRESS],
    ['the exact-permit proxy', EXACT_PERMIT2_PROXY_ADDRESS],
  ];
  if (base.multicall) known.push(['multicall', base.multicall]);
  for (const [what, address] of known) await refusedForFree(t, `EIP-3009 to ${what}`, await eip3009(freshAccount(), address, 10_000n), 'payee_not_allowed');
  await refusedForFree(t, 'Permit2 to the stock chain stablecoin', await permit2(freshAccount(), stock.stablecoin.address, 10_000n), 'payee_not_allowed');
  const firstStock = stock.stocks?.[0];
  if (firstStock) await refusedForFree(t, 'Permit2 to a stock token', await permit2(freshAccount(), firstStock.address, 10_000n), 'payee_not_allowed');
});

t.test('a payment failing any pure check costs no RPC, even with a signature no key made', async (t) => {
  const payer = freshAccount();
  const impostor = freshAccount();
  const payTo = freshAccount().address;
  const req = requirementsFor(CAIP2.base, base, payTo, '10000');
  const forged = async (over: { value?: bigint; validBefore?: bigint; to?: Address }) => {
    const s = await signTransferAuthorization(impostor, baseDomain, { from: payer.address, to: payTo, value: 10_000n, validAfter: 0n, validBefore: now() + 120n, ...over });
    const a = s.authorization;
    const payment = {
      x402Version: 2,
      accepted: req,
      payload: { signature: s.signature, authorization: { from: a.from, to: a.to, value: a.value.toString(), validAfter: '0', validBefore: a.validBefore.toString(), nonce: a.nonce } },
    } as PaymentPayload;
    return { payment, req };
  };
  // Without the pure checks first, each of these would ask the chain whether the payer is a contract wallet.
  await refusedForFree(t, 'forged and expired', await forged({ validBefore: now() + 1n }), 'invalid_exact_evm_payload_authorization_valid_before');
  await refusedForFree(t, 'forged and the wrong amount', await forged({ value: 9_999n }), 'invalid_exact_evm_payload_authorization_value_mismatch');
  await refusedForFree(t, 'forged and the wrong recipient', await forged({ to: freshAccount().address }), 'invalid_exact_evm_recipient_mismatch');
});

t.test('an asset without code is asked about once, not once per request', async (t) => {
  const sepolia = network(manifest, CAIP2.baseSepolia);
  const req = { ...requirementsFor(CAIP2.baseSepolia, sepolia, freshAccount().address, '10000'), asset: undeployedAsset };
  const before = rpc.calls().get('eth_getCode') ?? 0;
  const answers: Answer[] = [];
  for (let i = 0; i < 10; i++) answers.push(await call(i % 2 ? 'settle' : 'verify', { payment: await officialPayment(freshAccount(), req), req }));
  t.same(
    answers.map((a) => [a.status, a.json.invalidReason ?? a.json.errorReason]),
    Array.from({ length: 10 }, () => [200, 'asset_not_deployed_contract']),
    'every answer says the asset is not deployed',
  );
  t.equal((rpc.calls().get('eth_getCode') ?? 0) - before, 1, 'one eth_getCode for ten requests');
});

t.test('a payer over its quota is refused before any RPC, and nothing moves', async (t) => {
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const payTo = freshAccount().address;
  const pay = async () => {
    const req = requirementsFor(CAIP2.base, base, payTo, '10000');
    return { payment: await officialPayment(payer, req), req };
  };
  // A forger naming the payer does not use up the payer's quota: signatures no key made have a bucket of their own.
  const impostor = freshAccount();
  for (let i = 0; i < PAYER_QUOTA + 2; i++) {
    const s = await signTransferAuthorization(impostor, baseDomain, { from: payer.address, to: payTo, value: 10_000n, validAfter: 0n, validBefore: now() + 120n });
    const req = requirementsFor(CAIP2.base, base, payTo, '10000');
    const a = s.authorization;
    const forged = {
      x402Version: 2,
      accepted: req,
      payload: { signature: s.signature, authorization: { from: a.from, to: a.to, value: '10000', validAfter: '0', validBefore: a.validBefore.toString(), nonce: a.nonce } },
    } as PaymentPayload;
    // Refused as a forgery, or (past the quota of signatures no key made under this name) as over quota.
    const reason = (await call('verify', { payment: forged, req })).json.invalidReason;
    t.equal(reason, i < PAYER_QUOTA ? 'invalid_exact_evm_signature' : 'payer_rate_limited', `forgery ${i + 1} is refused`);
  }
  for (let i = 0; i < PAYER_QUOTA; i++) {
    const v = await call('verify', await pay());
    t.same([v.status, v.json.isValid], [200, true], `payment ${i + 1} of the quota verifies (${JSON.stringify(v.json)})`);
  }
  const payments = await Promise.all(Array.from({ length: 8 }, () => pay()));
  const rpcBefore = rpc.total();
  const relayersBefore = await relayerState();
  const answers = await Promise.all(payments.map((p, i) => call(i % 2 ? 'settle' : 'verify', p)));
  t.same(
    answers.map((a) => [a.status, a.json.invalidReason ?? a.json.errorReason]),
    Array.from({ length: 8 }, () => [200, 'payer_rate_limited']),
    'every payment beyond the quota is refused with payer_rate_limited',
  );
  t.equal(rpc.total(), rpcBefore, 'no RPC call for a refused payment');
  t.same(await relayerState(), relayersBefore, 'no relayer transaction');
  t.equal(await stableBalance(base, payTo), 0n, 'nothing was paid');
  t.equal(await stableBalance(base, payer.address), parseUnits('1', 6), 'the payer kept everything');

  // Another payer is not held back by this one.
  const other = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const req = requirementsFor(CAIP2.base, base, payTo, '10000');
  const settled = await call('settle', { payment: await officialPayment(other, req), req });
  t.equal(settled.json.success, true, `another payer settles (${JSON.stringify(settled.json)})`);
  t.equal(await stableBalance(base, payTo), 10_000n);
});
