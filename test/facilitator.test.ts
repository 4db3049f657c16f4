import t from 'tap';
import { randomBytes } from 'node:crypto';
import { HTTPFacilitatorClient } from '@x402/core/http';
import { parseUnits } from 'viem';
import { CAIP2, EXACT_PERMIT2_PROXY_ADDRESS, SUPPORTED_NETWORKS } from '../src/chain/canonical.ts';
import { DEVNET_ROLES, devnetAccount, devnetPrivateKey } from '../src/devnet/accounts.ts';
import type { PaymentPayload, PaymentRequirements } from '../src/protocol/x402/types.ts';
import { ownerWalletArtifact, stablecoinArtifact } from '../src/devnet/contracts/artifacts/index.ts';
import { clientsFor, freshAccount, network, tester, testDevnet, TEST_MANIFEST_PATH } from './helpers/devnet.ts';
import { signTransferAuthorization } from './helpers/eip3009.ts';
import { officialPayment, fundedPayer, postJson, requirementsFor, stableBalance } from './helpers/payments.ts';
import { randomNonce, signWitnessPermit } from './helpers/permit2.ts';
import { spawnFacilitator } from './helpers/spawn-facilitator.ts';
import { supportedExtensionKeys } from '../src/protocol/x402/extensions/index.ts';

const manifest = testDevnet();
// This file's facilitator sends from two tester accounts, so no other test's nonces collide with its relayers.
const relayerIndices = [DEVNET_ROLES.testers[4], DEVNET_ROLES.testers[5]] as number[];
const funder = tester('facilitator');
const fac = await spawnFacilitator({
  manifestPath: TEST_MANIFEST_PATH,
  env: {
    GATE402_RELAYER_KEYS: relayerIndices.map((i) => devnetPrivateKey(i)).join(','),
    GATE402_FACILITATOR_RATE_CAPACITY: '100000',
    GATE402_FACILITATOR_RATE_PER_SECOND: '100000',
    GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '100000',
    GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '100000',
  },
});
t.teardown(() => fac.stop());
const client = new HTTPFacilitatorClient({ url: fac.url });
const now = () => BigInt(Math.floor(Date.now() / 1000));

async function relayerNonces(): Promise<number[]> {
  return Promise.all(
    SUPPORTED_NETWORKS.flatMap((caip2) => {
      const { pub } = clientsFor(network(manifest, caip2), funder);
      return relayerIndices.map((i) => pub.getTransactionCount({ address: devnetAccount(i).address, blockTag: 'pending' }));
    }),
  );
}

t.test('the official client lists the three kinds', async (t) => {
  const supported = await client.getSupported();
  const exact = supported.kinds.filter((k) => k.scheme === 'exact');
  t.same(exact.map((k) => k.network).sort(), [...SUPPORTED_NETWORKS].sort());
  for (const k of exact) t.same([k.x402Version, k.scheme], [2, 'exact']);
  // Beside them, batch-settlement wherever its contracts stand (every devnet chain): test/batch-settlement-facilitator.test.ts.
  t.same(
    supported.kinds.filter((k) => k.scheme !== 'exact').map((k) => [k.x402Version, k.scheme]),
    SUPPORTED_NETWORKS.map(() => [2, 'batch-settlement']),
  );
  t.same(supported.extensions, supportedExtensionKeys(), 'the extensions gate402 implements');
  t.ok(supported.extensions.includes('bazaar'));
  t.same(supported.signers['eip155:*']?.map((a) => a.toLowerCase()).sort(), relayerIndices.map((i) => devnetAccount(i).address.toLowerCase()).sort());
});

for (const caip2 of SUPPORTED_NETWORKS) {
  t.test(`official payloads verify and settle on ${caip2}, moving exactly the price`, async (t) => {
    const n = network(manifest, caip2);
    const payer = await fundedPayer(n, caip2, funder, parseUnits('1', 6));
    const payTo = freshAccount().address;
    const req = requirementsFor(caip2, n, payTo, '10000');
    const payment = await officialPayment(payer, req);
    const verified = await client.verify(payment, req);
    t.same({ isValid: verified.isValid, payer: verified.payer?.toLowerCase() }, { isValid: true, payer: payer.address.toLowerCase() });
    const settled = await client.settle(payment, req);
    t.equal(settled.success, true, JSON.stringify(settled));
    t.match(settled.transaction, /^0x[0-9a-f]{64}$/);
    t.equal(settled.network, caip2);
    t.equal(await stableBalance(n, payTo), 10_000n, 'payTo received exactly the price');
    t.equal(await stableBalance(n, payer.address), 990_000n, 'payer paid exactly the price');
    const { pub } = clientsFor(n, funder);
    const receipt = await pub.getTransactionReceipt({ hash: settled.transaction as `0x${string}` });
    t.equal(receipt.status, 'success');
    t.ok(
      relayerIndices.some((i) => devnetAccount(i).address.toLowerCase() === receipt.from.toLowerCase()),
      'a relayer paid the gas',
    );

    const again = await client.settle(payment, req);
    t.same(again, settled, 'settling the same payload again answers the recorded result');
    t.equal(await stableBalance(n, payTo), 10_000n, 'and moves nothing');
    const replay = await client.verify(payment, req);
    t.equal(replay.isValid, false, 'a settled payload no longer verifies');
    t.equal(replay.invalidReason, caip2 === CAIP2.stockChain ? 'permit2_invalid_nonce' : 'invalid_exact_evm_nonce_already_used');
  });
}

t.test('each invalid case names the reference reason', async (t) => {
  const base = network(manifest, CAIP2.base);
  const payer = await fundedPayer(base, CAIP2.base, funder, parseUnits('1', 6));
  const payTo = freshAccount().address;
  const req = requirementsFor(CAIP2.base, base, payTo, '10000');
  const domain = { name: base.stablecoin.name, version: base.stablecoin.version, chainId: base.chainId, verifyingContract: base.stablecoin.address };
  const signed = async (over: Partial<{ to: `0x${string}`; value: bigint; validAfter: bigint; validBefore: bigint }>) => {
    const s = await signTransferAuthorization(payer, domain, { to: payTo, value: 10_000n, validAfter: 0n, validBefore: now() + 120n, ...over });
    const a = s.authorization;
    return {
      x402Version: 2,
      accepted: req,
      payload: {
        signature: s.signature,
        authorization: { from: a.from, to: a.to, value: a.value.toString(), validAfter: a.validAfter.toString(), validBefore: a.validBefore.toString(), nonce: a.nonce },
      },
    } as PaymentPayload;
  };
  const reason = async (payment: PaymentPayload, requirements: PaymentRequirements) => (await client.verify(payment, requirements)).invalidReason;

  t.equal(await reason(await signed({ value: 9_999n }), req), 'invalid_exact_evm_payload_authorization_value_mismatch', 'wrong amount');
  t.equal(await reason(await signed({ to: freshAccount().address }), req), 'invalid_exact_evm_recipient_mismatch', 'wrong recipient');
  t.equal(await reason(await signed({ validBefore: now() + 2n }), req), 'invalid_exact_evm_payload_authorization_valid_before', 'expired (inside the 6 s buffer)');
  t.equal(await reason(await signed({ validAfter: now() + 600n }), req), 'invalid_exact_evm_payload_authorization_valid_after', 'not yet valid');

  const used = await signed({});
  t.equal((await client.settle(used, req)).success, true);
  t.equal(await reason(used, req), 'invalid_exact_evm_nonce_already_used', 'nonce already used');

  const broke = freshAccount();
  t.equal(await reason(await officialPayment(broke, req), req), 'invalid_exact_evm_insufficient_balance', 'insufficient balance');

  const wrongName = { ...req, extra: { name: 'Wrong Coin', version: '2' } };
  t.equal(await reason(await officialPayment(payer, wrongName), wrongName), 'invalid_exact_evm_token_name_mismatch', 'wrong EIP-712 name');

  const impostor = freshAccount();
  const forged = await signTransferAuthorization(impostor, domain, { from: payer.address, to: payTo, value: 10_000n, validAfter: 0n, validBefore: now() + 120n });
  const forgedPayment = (await signed({})) as PaymentPayload & { payload: { authorization: object } };
  t.equal(
    await reason({ ...forgedPayment, payload: { signature: forged.signature, authorization: { ...forgedPayment.payload.authorization, nonce: forged.authorization.nonce } } } as PaymentPayload, req),
    'invalid_exact_evm_signature',
    'a signature by another key',
  );

  const stock = network(manifest, CAIP2.stockChain);
  const unapproved = await fundedPayer(stock, CAIP2.stockChain, funder, parseUnits('1', 6), { approvePermit2: false });
  const stockReq = requirementsFor(CAIP2.stockChain, stock, payTo, '10000');
  t.equal(await reason(await officialPayment(unapproved, stockReq), stockReq), 'permit2_allowance_required', 'Permit2 without approval');

  const approved = await fundedPayer(stock, CAIP2.stockChain, funder, parseUnits('1', 6));
  const wrongSpender = freshAccount().address;
  const permit = { permitted: { token: stock.stablecoin.address, amount: 10_000n }, spender: wrongSpender, nonce: randomNonce(), deadline: now() + 120n, witness: { to: payTo, validAfter: 0n } };
  const sig = await signWitnessPermit(approved, stock.chainId, permit);
  const spenderPayment = {
    x402Version: 2,
    accepted: stockReq,
    payload: {
      signature: sig,
      permit2Authorization: {
        from: approved.address,
        permitted: { token: permit.permitted.token, amount: '10000' },
        spender: wrongSpender,
        nonce: permit.nonce.toString(),
        deadline: permit.deadline.toString(),
        witness: { to: payTo, validAfter: '0' },
      },
    },
  } as PaymentPayload;
  t.equal(await reason(spenderPayment, stockReq), 'invalid_permit2_spender', 'wrong spender');
  t.not(wrongSpender, EXACT_PERMIT2_PROXY_ADDRESS);
});

t.test("a contract wallet pays: ERC-1271 vouches for its owner's signature", async (t) => {
  const n = network(manifest, CAIP2.base);
  const { pub, wallet } = clientsFor(n, funder);
  const owner = freshAccount();
  const hash = await wallet.deployContract({ abi: ownerWalletArtifact.abi, bytecode: ownerWalletArtifact.bytecode, args: [owner.address] });
  const contractWallet = (await pub.waitForTransactionReceipt({ hash })).contractAddress as `0x${string}`;
  await pub.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'mint', args: [contractWallet, 50_000n] }) });
  const payTo = freshAccount().address;
  const req = requirementsFor(CAIP2.base, n, payTo, '20000');
  const domain = { name: n.stablecoin.name, version: n.stablecoin.version, chainId: n.chainId, verifyingContract: n.stablecoin.address };
  const s = await signTransferAuthorization(owner, domain, { from: contractWallet, to: payTo, value: 20_000n, validAfter: 0n, validBefore: now() + 120n });
  const a = s.authorization;
  const payment = {
    x402Version: 2,
    accepted: req,
    payload: { signature: s.signature, authorization: { from: a.from, to: a.to, value: '20000', validAfter: '0', validBefore: a.validBefore.toString(), nonce: a.nonce } },
  } as PaymentPayload;
  const verified = await client.verify(payment, req);
  t.same([verified.isValid, verified.payer?.toLowerCase()], [true, contractWallet.toLowerCase()], 'valid, and the payer is the wallet');
  const settled = await client.settle(payment, req);
  t.equal(settled.success, true, JSON.stringify(settled));
  t.equal(await stableBalance(n, payTo), 20_000n);
  t.equal(await stableBalance(n, contractWallet), 30_000n, 'the wallet paid exactly the price');

  const stranger = freshAccount();
  const forged = await signTransferAuthorization(stranger, domain, { from: contractWallet, to: payTo, value: 20_000n, validAfter: 0n, validBefore: now() + 120n });
  const forgedPayment = {
    ...payment,
    payload: { signature: forged.signature, authorization: { ...(payment.payload as { authorization: object }).authorization, nonce: forged.authorization.nonce } },
  } as PaymentPayload;
  t.equal((await client.verify(forgedPayment, req)).invalidReason, 'invalid_exact_evm_signature', 'the wallet does not vouch for a stranger');
});

t.test('50 concurrent settles of one payload: one transfer, 50 consistent answers', async (t) => {
  const n = network(manifest, CAIP2.base);
  const payer = await fundedPayer(n, CAIP2.base, funder, parseUnits('1', 6));
  const payTo = freshAccount().address;
  const req = requirementsFor(CAIP2.base, n, payTo, '25000');
  const payment = await officialPayment(payer, req);
  const before = await relayerNonces();
  const answers = await Promise.all(Array.from({ length: 50 }, () => client.settle(payment, req)));
  const hashes = new Set(answers.map((a) => a.transaction));
  const kinds = [...new Set(answers.map((a) => JSON.stringify({ success: a.success, errorReason: a.errorReason, errorMessage: a.errorMessage, transaction: a.transaction })))];
  t.equal(hashes.size, 1, `every answer names the same transaction (answers: ${kinds.join(' | ')})`);
  t.ok(
    answers.every((a) => a.success),
    'every answer says success',
  );
  t.equal(await stableBalance(n, payTo), 25_000n, 'the price moved once');
  t.equal(await stableBalance(n, payer.address), 975_000n);
  // Nonces make a second transfer impossible anyway: count what the relayers sent, so a duplicate broadcast shows.
  const after = await relayerNonces();
  t.equal(
    after.reduce((sum, nonce, i) => sum + nonce - (before[i] as number), 0),
    1,
    'the relayers sent exactly one transaction',
  );
});

t.test('the official client gets an answer, not an exception, for what gate402 does not settle; no RPC is made', async (t) => {
  const before = await relayerNonces();
  const base = network(manifest, CAIP2.base);
  const req = requirementsFor(CAIP2.base, base, freshAccount().address, '10000');
  const payment = await officialPayment(freshAccount(), req);
  const cases: Array<[string, PaymentRequirements, PaymentPayload, string]> = [
    ['another scheme', { ...req, scheme: 'upto' } as unknown as PaymentRequirements, { ...payment, accepted: { ...req, scheme: 'upto' } } as unknown as PaymentPayload, 'unsupported_scheme'],
    ['a network not served', { ...req, network: 'eip155:1' }, { ...payment, accepted: { ...req, network: 'eip155:1' } }, 'invalid_network'],
    ['a non-EVM network', { ...req, network: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp' } as unknown as PaymentRequirements, payment, 'invalid_network'],
    ['an asset not settled', { ...req, asset: freshAccount().address }, payment, 'unsupported_asset'],
    ['a payload that is not one', req, { ...payment, payload: { signature: 12 } } as unknown as PaymentPayload, 'invalid_payload'],
    ['requirements without a payee', { ...req, payTo: 'nobody' } as unknown as PaymentRequirements, payment, 'invalid_payment_requirements'],
  ];
  for (const [what, requirements, p, code] of cases) {
    const verified = await client.verify(p, requirements);
    t.match(verified, { isValid: false, invalidReason: code }, `verify, ${what}: ${code}`);
    const settled = await client.settle(p, requirements);
    t.match(settled, { success: false, errorReason: code, transaction: '', network: String(requirements.network) }, `settle, ${what}: ${code}`);
  }
  const v1 = await postJson(`${fac.url}/verify`, { x402Version: 1, paymentPayload: { ...payment, x402Version: 1 }, paymentRequirements: req });
  t.match(v1, { status: 200, json: { isValid: false, invalidReason: 'invalid_x402_version' } }, 'another x402 version is refused in the protocol too');
  t.same(await relayerNonces(), before, 'no relayer sent anything');
});

t.test('1,000 malformed or hostile requests: a 200 refusal for a verify request, a 400 otherwise; no crash, no relayer transaction', async (t) => {
  const before = await relayerNonces();
  const base = network(manifest, CAIP2.base);
  const payer = freshAccount();
  const good = await officialPayment(payer, requirementsFor(CAIP2.base, base, freshAccount().address, '10000'));
  const goodReq = requirementsFor(CAIP2.base, base, freshAccount().address, '10000');
  const bodies: Array<{ body: string | object; refusal?: string }> = [];
  // Each body, and the reason it is refused with (a 200), or none when it is not a verify request (a 400).
  const mutations: Array<[(b: Record<string, unknown>) => unknown, string | undefined]> = [
    [() => randomBytes(64).toString('latin1'), undefined],
    [(b) => JSON.stringify(b).slice(0, 40), undefined],
    [(b) => ({ ...b, x402Version: 1 }), 'invalid_x402_version'],
    [(b) => ({ ...b, x402Version: '2' }), 'invalid_x402_version'],
    [(b) => ({ ...b, paymentRequirements: { ...goodReq, amount: '1'.repeat(90) } }), 'invalid_payment_requirements'],
    [(b) => ({ ...b, paymentRequirements: { ...goodReq, amount: -5 } }), 'invalid_payment_requirements'],
    [(b) => ({ ...b, paymentRequirements: { ...goodReq, network: 'eip155:1' } }), 'invalid_network'],
    [(b) => ({ ...b, paymentRequirements: { ...goodReq, asset: freshAccount().address } }), 'unsupported_asset'],
    [(b) => ({ ...b, paymentRequirements: { ...goodReq, scheme: 'upto' } }), 'unsupported_scheme'],
    [(b) => ({ ...b, paymentPayload: { ...good, payload: { signature: 12 } } }), 'invalid_payload'],
    [(b) => ({ ...b, paymentPayload: null }), undefined],
    [() => [], undefined],
    [() => 'null', undefined],
    [() => '{"x402Version":2,"paymentPayload":{"__proto__":{"isValid":true}}}', undefined],
    [() => ({ x402Version: 2, paymentPayload: good, paymentRequirements: { ...goodReq, payTo: 'not an address' } }), 'invalid_payment_requirements'],
  ];
  for (let i = 0; i < 1000; i++) {
    const [m, refusal] = mutations[i % mutations.length] as [(b: Record<string, unknown>) => unknown, string | undefined];
    bodies.push({ body: m({ x402Version: 2, paymentPayload: good, paymentRequirements: goodReq }) as string | object, ...(refusal ? { refusal } : {}) });
  }
  const answers: Array<Awaited<ReturnType<typeof postJson>> & { route: string; refusal?: string }> = [];
  for (let i = 0; i < bodies.length; i += 50) {
    answers.push(
      ...(await Promise.all(
        bodies.slice(i, i + 50).map(async (b, j) => {
          const route = (i + j) % 2 ? 'settle' : 'verify';
          return { ...(await postJson(`${fac.url}/${route}`, b.body)), route, ...(b.refusal ? { refusal: b.refusal } : {}) };
        }),
      )),
    );
  }
  const wrong = answers.filter((a) => {
    if (!a.contentType?.includes('application/json') || typeof a.json !== 'object' || a.json === null) return true;
    const body = a.json as Record<string, unknown>;
    if (a.refusal === undefined) return a.status !== 400 || typeof body.error !== 'string';
    if (a.status !== 200) return true;
    return a.route === 'verify' ? body.isValid !== false || body.invalidReason !== a.refusal : body.success !== false || body.errorReason !== a.refusal || body.transaction !== '';
  });
  t.equal(wrong.length, 0, `every answer as the protocol fixes it (${JSON.stringify(wrong.slice(0, 3))})`);
  t.equal(answers.filter((a) => a.status === 200).length, answers.filter((a) => a.refusal).length, 'a 200 exactly for the verify requests');
  t.equal(fac.child.exitCode, null, 'the facilitator is still running');
  t.equal((await fetch(`${fac.url}/health`)).status, 200);
  t.same(await relayerNonces(), before, 'no relayer sent anything');
});
