// Front-running: the buyer's signed authorization reaches the chain through someone else first (a copy of the call
// taken from the mempool, or handed over before the service saw it), or through our own send whose answer was lost.
// The payment moved once: the service must say settled (naming the transaction that did it), serve the buyer once,
// and never send a second settlement.
import t, { type Test } from 'tap';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import { decodeFunctionData, maxUint256, parseEther, parseUnits, toHex, type Address, type Hex, type LocalAccount, type TransactionReceipt } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2, EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS } from '../../src/chain/canonical.ts';
import { exactPermit2ProxyArtifact, multicallArtifact, stablecoinArtifact } from '../../src/devnet/contracts/artifacts/index.ts';
import type { DevnetManifest } from '../../src/devnet/manifest.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';
import type { Eip3009Payload, PaymentPayload, PaymentRequirements, Permit2Payload } from '../../src/protocol/x402/types.ts';
import { clientsFor, freshAccount, tester } from '../helpers/devnet.ts';
import { startLossyRpc } from '../helpers/lossy-rpc.ts';
import { officialPayment, postJson, requirementsFor, stableBalance } from '../helpers/payments.ts';
import { spawnOwnDevnet } from '../helpers/spawn-devnet.ts';
import { spawnFacilitator, type SpawnedFacilitator } from '../helpers/spawn-facilitator.ts';
import { tempDir } from '../helpers/temp-dir.ts';

// Pausing mining would stall every other test on the shared devnet, so this file runs its own chains.
const devnet = await spawnOwnDevnet('front-run');
t.teardown(() => devnet.stop());
const funder = tester('attackMoney');
const PRICE = 10_000n;

function chain(caip2: string): NetworkEntry {
  const n = devnet.manifest.networks[caip2];
  if (!n) throw new Error(`the devnet has no ${caip2}`);
  return n;
}

/** Fresh relayer keys with gas on every chain: nobody else sends from them, so their nonces count exactly our sends. */
async function freshRelayers(count: number): Promise<{ keys: string; accounts: LocalAccount[] }> {
  const keys = Array.from({ length: count }, () => generatePrivateKey());
  const accounts = keys.map((k) => privateKeyToAccount(k));
  for (const n of Object.values(devnet.manifest.networks)) for (const a of accounts) await rpcCall(n.rpcUrl, 'anvil_setBalance', [a.address, toHex(parseEther('10'))]);
  return { keys: keys.join(','), accounts };
}

async function txCount(n: NetworkEntry, accounts: readonly { address: Address }[]): Promise<number> {
  const { pub } = clientsFor(n, funder);
  const counts = await Promise.all(accounts.map((a) => pub.getTransactionCount({ address: a.address, blockTag: 'latest' })));
  return counts.reduce((a, b) => a + b, 0);
}

/** Mining paused on `n` for the rest of the test, resumed (and the pool mined) in its teardown whatever happens. */
async function pauseMining(t: Test, n: NetworkEntry): Promise<void> {
  await rpcCall(n.rpcUrl, 'evm_setAutomine', [false]);
  t.teardown(async () => {
    await rpcCall(n.rpcUrl, 'evm_setAutomine', [true]);
    await rpcCall(n.rpcUrl, 'evm_mine', []);
  });
}

/**
 * The receipt of `hash`, asked for until it is there. viem's waitForTransactionReceipt waits for a new block after
 * its first look; on this file's quiet chains a block mined just before that look can be the last for minutes.
 */
async function mined(n: NetworkEntry, hash: Hex): Promise<TransactionReceipt> {
  const { pub } = clientsFor(n, funder);
  for (;;) {
    const receipt = await pub.getTransactionReceipt({ hash }).catch(() => undefined);
    if (receipt) return receipt;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A fresh payer holding `amount` of the chain's stablecoin; on the stock chain also with gas and Permit2 approved. */
async function fundedBuyer(n: NetworkEntry, caip2: string, amount: bigint): Promise<LocalAccount> {
  const payer = freshAccount();
  const { wallet } = clientsFor(n, funder);
  await mined(n, await wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'mint', args: [payer.address, amount] }));
  if (caip2 === CAIP2.stockChain) {
    await rpcCall(n.rpcUrl, 'anvil_setBalance', [payer.address, toHex(parseEther('1'))]);
    const own = clientsFor(n, payer);
    await mined(n, await own.wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] }));
  }
  return payer;
}

/** A wallet of the attacker's, with gas. */
async function frontRunner(n: NetworkEntry): Promise<LocalAccount> {
  const attacker = freshAccount();
  await rpcCall(n.rpcUrl, 'anvil_setBalance', [attacker.address, toHex(parseEther('1'))]);
  return attacker;
}

/** The attacker submits the buyer's signed payment itself, straight to the token (EIP-3009) or the exact-permit proxy (Permit2). */
async function submitDirectly(n: NetworkEntry, attacker: LocalAccount, payload: PaymentPayload['payload'], asset: Address, opts: { wait?: boolean } = {}): Promise<Hex> {
  const { wallet } = clientsFor(n, attacker);
  let hash: Hex;
  if ('permit2Authorization' in payload) {
    const p = (payload as Permit2Payload).permit2Authorization;
    hash = await wallet.writeContract({
      address: EXACT_PERMIT2_PROXY_ADDRESS,
      abi: exactPermit2ProxyArtifact.abi,
      functionName: 'settle',
      args: [
        { permitted: { token: p.permitted.token, amount: BigInt(p.permitted.amount) }, nonce: BigInt(p.nonce), deadline: BigInt(p.deadline) },
        p.from,
        { to: p.witness.to, validAfter: BigInt(p.witness.validAfter) },
        (payload as Permit2Payload).signature,
      ],
    });
  } else {
    const { authorization: a, signature } = payload as Eip3009Payload;
    hash = await wallet.writeContract({
      address: asset,
      abi: stablecoinArtifact.abi,
      functionName: 'transferWithAuthorization',
      args: [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, signature],
    });
  }
  if (opts.wait === false) return hash;
  const receipt = await mined(n, hash);
  if (receipt.status !== 'success') throw new Error(`the front-runner's own settlement reverted: ${hash}`);
  return hash;
}

/** The attacker reads a pending settlement from the mempool and sends the same call, paying a higher tip to go first. */
async function copyFromMempool(n: NetworkEntry, attacker: LocalAccount, victim: Hex): Promise<Hex> {
  const { pub, wallet } = clientsFor(n, attacker);
  const tx = await pub.getTransaction({ hash: victim });
  if (tx.blockNumber !== null) throw new Error('the victim transaction is mined already');
  const tip = (tx.maxPriorityFeePerGas ?? 1n) * 10n + parseUnits('1', 9);
  return wallet.sendTransaction({ to: tx.to as Address, data: tx.input, gas: tx.gas, maxPriorityFeePerGas: tip, maxFeePerGas: (tx.maxFeePerGas ?? 0n) * 2n + tip });
}

/** Mines one block holding both transactions and checks the attacker's went first and ours reverted. */
async function mineFrontRunFirst(t: Test, n: NetworkEntry, attackerTx: Hex, ourTx: Hex): Promise<void> {
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  const { pub } = clientsFor(n, funder);
  const [theirs, ours] = await Promise.all([pub.getTransactionReceipt({ hash: attackerTx }), pub.getTransactionReceipt({ hash: ourTx })]);
  t.equal(theirs.blockNumber, ours.blockNumber, 'both in one block');
  t.ok(theirs.transactionIndex < ours.transactionIndex, "the front-runner's copy first");
  t.same([theirs.status, ours.status], ['success', 'reverted'], 'it moved the money; our settlement reverted');
}

/** Permit2's plain `permitTransferFrom` (no witness), the one overload called here. */
const permitTransferFromAbi = [
  {
    type: 'function',
    name: 'permitTransferFrom',
    stateMutability: 'nonpayable',
    inputs: [
      {
        name: 'permit',
        type: 'tuple',
        components: [
          {
            name: 'permitted',
            type: 'tuple',
            components: [
              { name: 'token', type: 'address' },
              { name: 'amount', type: 'uint256' },
            ],
          },
          { name: 'nonce', type: 'uint256' },
          { name: 'deadline', type: 'uint256' },
        ],
      },
      {
        name: 'transferDetails',
        type: 'tuple',
        components: [
          { name: 'to', type: 'address' },
          { name: 'requestedAmount', type: 'uint256' },
        ],
      },
      { name: 'owner', type: 'address' },
      { name: 'signature', type: 'bytes' },
    ],
    outputs: [],
  },
] as const;

type Settle = { success: boolean; transaction: string; status?: string; errorReason?: string; payer?: string };

/** Asks /settle until the answer is not pending (as a client holding a pending answer does). */
async function settleUntilFinal(fac: SpawnedFacilitator, body: unknown): Promise<Settle> {
  for (;;) {
    const r = (await postJson(`${fac.url}/settle`, body)).json as Settle;
    if (r.status !== 'pending') return r;
    await new Promise((res) => setTimeout(res, 100));
  }
}

const facRelayers = await freshRelayers(2);
const fac = await spawnFacilitator({
  manifestPath: devnet.manifestPath,
  env: { GATE402_RELAYER_KEYS: facRelayers.keys, GATE402_CONFIRM_DEADLINE_MS: '800', GATE402_RECEIPT_POLL_MS: '50' },
}).catch(async (err: unknown) => {
  await devnet.stop();
  throw err;
});
t.teardown(() => fac.stop());

for (const caip2 of [CAIP2.base, CAIP2.stockChain]) {
  const scheme = caip2 === CAIP2.stockChain ? 'Permit2' : 'EIP-3009';
  const n = chain(caip2);

  t.test(`facilitator, ${scheme} on ${caip2}: the authorization settled by someone else before /settle is reported settled by their transaction`, async (t) => {
    const payer = await fundedBuyer(n, caip2, parseUnits('1', 6));
    const merchant = freshAccount().address;
    const req = requirementsFor(caip2, n, merchant, String(PRICE));
    const body = { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req };
    const sendsBefore = await txCount(n, facRelayers.accounts);
    const theirs = await submitDirectly(n, await frontRunner(n), body.paymentPayload.payload, n.stablecoin.address);

    const r = await settleUntilFinal(fac, body);
    t.same([r.success, r.transaction, r.payer?.toLowerCase()], [true, theirs, payer.address.toLowerCase()], `settled, by the front-runner's transaction: ${JSON.stringify(r)}`);
    const again = (await postJson(`${fac.url}/settle`, body)).json as Settle;
    t.same([again.success, again.transaction], [true, theirs], 'asked again: the same answer');
    t.equal(await txCount(n, facRelayers.accounts), sendsBefore, 'the facilitator sent nothing');
    t.equal(await stableBalance(n, payer.address), parseUnits('1', 6) - PRICE, 'the payer was charged once');
    t.equal(await stableBalance(n, merchant), PRICE, 'the merchant was paid once');
  });

  t.test(`facilitator, ${scheme} on ${caip2}: a copy from the mempool mined before our pending settlement; /settle reports settled by the copy`, async (t) => {
    const payer = await fundedBuyer(n, caip2, parseUnits('1', 6));
    const merchant = freshAccount().address;
    const req = requirementsFor(caip2, n, merchant, String(PRICE));
    const body = { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req };
    const attacker = await frontRunner(n);
    const sendsBefore = await txCount(n, facRelayers.accounts);
    await pauseMining(t, n);

    const pending = (await postJson(`${fac.url}/settle`, body)).json as Settle;
    t.same([pending.success, pending.status], [false, 'pending'], 'pending while unmined');
    const ours = pending.transaction as Hex;
    const theirs = await copyFromMempool(n, attacker, ours);
    await mineFrontRunFirst(t, n, theirs, ours);

    const r = await settleUntilFinal(fac, body);
    t.same([r.success, r.transaction], [true, theirs], `settled, by the front-runner's transaction: ${JSON.stringify(r)}`);
    t.equal((await txCount(n, facRelayers.accounts)) - sendsBefore, 1, 'one settlement sent by the facilitator (the one that reverted), none after it');
    t.equal(await stableBalance(n, payer.address), parseUnits('1', 6) - PRICE, 'the payer was charged once');
    t.equal(await stableBalance(n, merchant), PRICE, 'the merchant was paid once');
  });
}

for (const caip2 of [CAIP2.base, CAIP2.stockChain]) {
  const scheme = caip2 === CAIP2.stockChain ? 'Permit2' : 'EIP-3009';
  t.test(`facilitator with batching, ${scheme} on ${caip2}: one call of our pending batch copied and mined first; both payments are reported settled`, async (t) => {
    const n = chain(caip2);
    const relayers = await freshRelayers(1);
    const batching = await spawnFacilitator({
      manifestPath: devnet.manifestPath,
      env: {
        GATE402_RELAYER_KEYS: relayers.keys,
        // Requests sent together meet in one batch however busy the machine is: the batch waits its whole window.
        GATE402_BATCH_WINDOW_MS: '2000',
        GATE402_BATCH_EAGER: 'false',
        // A payment waits that window in the settlement queue: its wait bound (default 500 ms) must exceed it, or the
        // second payment of the pair, reaching a loaded machine later, is shed as queue_slow (seen at load average 20).
        GATE402_SETTLE_QUEUE_WAIT_MS: '60000',
        GATE402_CONFIRM_DEADLINE_MS: '3000',
        GATE402_RECEIPT_POLL_MS: '50',
      },
    });
    t.teardown(() => batching.stop());
    const merchant = freshAccount().address;
    const payers = [await fundedBuyer(n, caip2, parseUnits('1', 6)), await fundedBuyer(n, caip2, parseUnits('1', 6))];
    const bodies = await Promise.all(
      payers.map(async (payer, i) => {
        const req = requirementsFor(caip2, n, merchant, String(PRICE + BigInt(i)));
        return { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req };
      }),
    );
    const attacker = await frontRunner(n);
    await pauseMining(t, n);

    const pending = (await Promise.all(bodies.map((b) => postJson(`${batching.url}/settle`, b)))).map((r) => r.json as Settle);
    t.same(
      pending.map((p) => p.status),
      ['pending', 'pending'],
      'both pending while unmined',
    );
    const batchTx = pending[0]?.transaction as Hex;
    t.equal(pending[1]?.transaction, batchTx, 'in one batch transaction');
    // The attacker lifts the first settlement call out of the batch in the mempool and sends it alone, tipping more.
    const { pub, wallet } = clientsFor(n, attacker);
    const batch = await pub.getTransaction({ hash: batchTx });
    const decoded = decodeFunctionData({ abi: multicallArtifact.abi, data: batch.input });
    if (decoded.functionName !== 'aggregate3') throw new Error(`the batch calls ${decoded.functionName}`);
    const lifted = decoded.args[0][0];
    if (!lifted) throw new Error('an empty batch');
    const tip = (batch.maxPriorityFeePerGas ?? 1n) * 10n + parseUnits('1', 9);
    const theirs = await wallet.sendTransaction({ to: lifted.target, data: lifted.callData, gas: 300_000n, maxPriorityFeePerGas: tip, maxFeePerGas: (batch.maxFeePerGas ?? 0n) * 2n + tip });
    await rpcCall(n.rpcUrl, 'evm_mine', []);
    const [theirReceipt, batchReceipt] = await Promise.all([pub.getTransactionReceipt({ hash: theirs }), pub.getTransactionReceipt({ hash: batchTx })]);
    t.ok(
      theirReceipt.status === 'success' && theirReceipt.blockNumber === batchReceipt.blockNumber && theirReceipt.transactionIndex < batchReceipt.transactionIndex,
      "the lifted call mined first, in the batch's block",
    );

    const answers = await Promise.all(bodies.map((b) => settleUntilFinal(batching, b)));
    t.same(
      answers.map((a) => a.success),
      [true, true],
      `both settled: ${JSON.stringify(answers)}`,
    );
    t.same(answers.map((a) => a.transaction).sort(), [theirs, batchTx].sort(), "one by the front-runner's transaction, the other by our batch");
    t.equal(await txCount(n, relayers.accounts), 1, 'one transaction sent by the facilitator: the batch, nothing after it');
    for (const [i, payer] of payers.entries()) t.equal(await stableBalance(n, payer.address), parseUnits('1', 6) - PRICE - BigInt(i), `payer ${i} charged once`);
    t.equal(await stableBalance(n, merchant), 2n * PRICE + 1n, 'the merchant paid once for each');
  });
}

t.test("facilitator, Permit2: the buyer's permit settled by someone else through the proxy's other entry point (settleWithPermit) is recognised", async (t) => {
  const n = chain(CAIP2.stockChain);
  const payer = await fundedBuyer(n, CAIP2.stockChain, parseUnits('1', 6));
  const merchant = freshAccount().address;
  const req = requirementsFor(CAIP2.stockChain, n, merchant, String(PRICE));
  const body = { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req };
  const payload = body.paymentPayload.payload as Permit2Payload;
  const p = payload.permit2Authorization;
  const sendsBefore = await txCount(n, facRelayers.accounts);
  const { wallet } = clientsFor(n, await frontRunner(n));
  // A junk EIP-2612 permit, which the proxy tries and ignores: the allowance is in place already.
  const junk = { value: BigInt(p.permitted.amount), deadline: BigInt(p.deadline), r: `0x${'11'.repeat(32)}` as Hex, s: `0x${'22'.repeat(32)}` as Hex, v: 27 };
  const theirs = await wallet.writeContract({
    address: EXACT_PERMIT2_PROXY_ADDRESS,
    abi: exactPermit2ProxyArtifact.abi,
    functionName: 'settleWithPermit',
    args: [
      junk,
      { permitted: { token: p.permitted.token, amount: BigInt(p.permitted.amount) }, nonce: BigInt(p.nonce), deadline: BigInt(p.deadline) },
      p.from,
      { to: p.witness.to, validAfter: BigInt(p.witness.validAfter) },
      payload.signature,
    ],
  });
  t.equal((await mined(n, theirs)).status, 'success', "the front-runner's settleWithPermit moved the money");

  const r = await settleUntilFinal(fac, body);
  t.same([r.success, r.transaction], [true, theirs], `settled, by the front-runner's transaction: ${JSON.stringify(r)}`);
  t.equal(await txCount(n, facRelayers.accounts), sendsBefore, 'the facilitator sent nothing');
  t.equal(await stableBalance(n, payer.address), parseUnits('1', 6) - PRICE, 'the payer was charged once');
  t.equal(await stableBalance(n, merchant), PRICE, 'the merchant was paid once');
});

t.test('facilitator, EIP-3009: an authorization the payer cancelled is still a failure (consumed, but nothing moved)', async (t) => {
  const n = chain(CAIP2.base);
  const payer = await fundedBuyer(n, CAIP2.base, parseUnits('1', 6));
  const merchant = freshAccount().address;
  const req = requirementsFor(CAIP2.base, n, merchant, String(PRICE));
  const body = { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req };
  const nonce = (body.paymentPayload.payload as Eip3009Payload).authorization.nonce;
  const signature = await payer.signTypedData({
    domain: { name: n.stablecoin.name, version: n.stablecoin.version, chainId: n.chainId, verifyingContract: n.stablecoin.address },
    types: {
      CancelAuthorization: [
        { name: 'authorizer', type: 'address' },
        { name: 'nonce', type: 'bytes32' },
      ],
    },
    primaryType: 'CancelAuthorization',
    message: { authorizer: payer.address, nonce },
  });
  const { wallet } = clientsFor(n, await frontRunner(n));
  await mined(n, await wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'cancelAuthorization', args: [payer.address, nonce, signature] }));
  const sendsBefore = await txCount(n, facRelayers.accounts);

  const r = await settleUntilFinal(fac, body);
  t.equal(r.success, false, `not settled: ${JSON.stringify(r)}`);
  t.equal(r.errorReason, 'invalid_exact_evm_nonce_already_used', 'the nonce is used');
  t.equal(await txCount(n, facRelayers.accounts), sendsBefore, 'nothing sent');
  t.equal(await stableBalance(n, payer.address), parseUnits('1', 6), 'nothing moved');
});

/** A facilitator whose RPC for `caip2` goes through a proxy losing send answers (`lossy-rpc.ts`), with fresh relayer keys. */
async function facilitatorBehind(t: Test, caip2: string) {
  const n = chain(caip2);
  const proxy = await startLossyRpc(n.rpcUrl);
  t.teardown(() => proxy.close());
  const dir = tempDir('lossy');
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const manifest = JSON.parse(readFileSync(devnet.manifestPath, 'utf8')) as DevnetManifest;
  (manifest.networks[caip2] as NetworkEntry).rpcUrl = proxy.url;
  const manifestPath = join(dir, 'manifest.json');
  writeFileSync(manifestPath, JSON.stringify(manifest));
  const relayers = await freshRelayers(1);
  const facilitator = await spawnFacilitator({ manifestPath, env: { GATE402_RELAYER_KEYS: relayers.keys, GATE402_CONFIRM_DEADLINE_MS: '5000', GATE402_RECEIPT_POLL_MS: '50' } });
  t.teardown(() => facilitator.stop());
  return { n, proxy, relayers, facilitator };
}

t.test("our own send that landed though the node's answer was lost is followed, not sent again, and reported settled", async (t) => {
  const { n, proxy: lossy, relayers, facilitator: lossyFac } = await facilitatorBehind(t, CAIP2.base);
  const payer = await fundedBuyer(n, CAIP2.base, parseUnits('1', 6));
  const merchant = freshAccount().address;
  const req = requirementsFor(CAIP2.base, n, merchant, String(PRICE));
  const body = { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req };
  const r = await settleUntilFinal(lossyFac, body);
  t.equal(r.success, true, `settled: ${JSON.stringify(r)}`);
  t.ok(lossy.lost >= 1, `the node's answer to our send was lost (${lossy.lost})`);
  t.equal(await txCount(n, relayers.accounts), 1, 'exactly one transaction sent by the relayer: no second settlement after the lost answer');
  const { pub } = clientsFor(n, funder);
  const receipt = await pub.getTransactionReceipt({ hash: r.transaction as Hex });
  t.equal(receipt.from.toLowerCase(), relayers.accounts[0]?.address.toLowerCase(), 'the reported transaction is our own');
  t.equal(await stableBalance(n, payer.address), parseUnits('1', 6) - PRICE, 'the payer was charged once');
  t.equal(await stableBalance(n, merchant), PRICE, 'the merchant was paid once');
});

t.test("Permit2: the payer's other payment of the same amount, in the block where this nonce was spent elsewhere, is not taken for this settlement", async (t) => {
  const n = chain(CAIP2.stockChain);
  const payer = await fundedBuyer(n, CAIP2.stockChain, parseUnits('1', 6)); // with gas and Permit2 approved
  const merchant = freshAccount().address;
  const req = requirementsFor(CAIP2.stockChain, n, merchant, String(PRICE));
  const [first, second] = [
    { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req },
    { x402Version: 2, paymentPayload: await officialPayment(payer, req), paymentRequirements: req },
  ] as const;
  const spent = (second.paymentPayload.payload as Permit2Payload).permit2Authorization;
  const sendsBefore = await txCount(n, facRelayers.accounts);
  const attacker = await frontRunner(n);
  await pauseMining(t, n);
  // In one block: the first payment settles (a Transfer of the price to the merchant), and the payer spends the
  // second payment's nonce on a plain Permit2 transfer of 1 unit to itself. The merchant got the price once.
  const theirs = await submitDirectly(n, attacker, first.paymentPayload.payload, n.stablecoin.address, { wait: false });
  const permit = { permitted: { token: n.stablecoin.address, amount: 1n }, nonce: BigInt(spent.nonce), deadline: BigInt(spent.deadline) };
  const signature = await payer.signTypedData({
    domain: { name: 'Permit2', chainId: n.chainId, verifyingContract: PERMIT2_ADDRESS },
    types: {
      PermitTransferFrom: [
        { name: 'permitted', type: 'TokenPermissions' },
        { name: 'spender', type: 'address' },
        { name: 'nonce', type: 'uint256' },
        { name: 'deadline', type: 'uint256' },
      ],
      TokenPermissions: [
        { name: 'token', type: 'address' },
        { name: 'amount', type: 'uint256' },
      ],
    },
    primaryType: 'PermitTransferFrom',
    message: { ...permit, spender: payer.address },
  });
  const { pub, wallet } = clientsFor(n, payer);
  const elsewhere = await wallet.writeContract({
    address: PERMIT2_ADDRESS,
    abi: permitTransferFromAbi,
    functionName: 'permitTransferFrom',
    args: [permit, { to: payer.address, requestedAmount: 1n }, payer.address, signature],
    gas: 200_000n,
  });
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  const [a, b] = await Promise.all([pub.getTransactionReceipt({ hash: theirs }), pub.getTransactionReceipt({ hash: elsewhere })]);
  t.ok(a.status === 'success' && b.status === 'success' && a.blockNumber === b.blockNumber, 'both mined, in one block');

  const r2 = await settleUntilFinal(fac, second);
  t.same([r2.success, r2.errorReason], [false, 'permit2_invalid_nonce'], `the second payment is not settled: ${JSON.stringify(r2)}`);
  const r1 = await settleUntilFinal(fac, first);
  t.same([r1.success, r1.transaction], [true, theirs], 'the first is, by the transaction that ran it');
  t.equal(await txCount(n, facRelayers.accounts), sendsBefore, 'the facilitator sent nothing');
  t.equal(await stableBalance(n, merchant), PRICE, 'the merchant was paid once');
});

// The gateway: a front-run payment still buys the resource, once.
const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());
const gwRelayers = await freshRelayers(2);
const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: devnet.manifestPath,
  env: {
    GATE402_RELAYER_KEYS: gwRelayers.keys,
    GATE402_CATALOG_UPSTREAM_BASE: new URL(fixtures.baseUrlFor('catjoke')).origin,
    GATE402_CONFIRM_DEADLINE_MS: '800',
    GATE402_RECEIPT_POLL_MS: '50',
  },
});
t.teardown(() => gw.stop());
const url = `${gw.url}/m/catjoke/joke?params%5Btopic%5D=naps&lang=en`;

async function offerOn(caip2: string): Promise<PaymentRequirements> {
  const unpaid = await fetch(url);
  await unpaid.arrayBuffer();
  const offer = decodePaymentRequiredHeader(unpaid.headers.get('payment-required') as string).accepts.find((o) => o.network === caip2);
  if (!offer) throw new Error(`no ${caip2} offer`);
  return offer as PaymentRequirements;
}

/** Sends the credential until the answer is not 202 (pending), as a buyer told to come back does. */
async function buyUntilFinal(credential: Record<string, string>): Promise<Response> {
  for (;;) {
    const res = await fetch(url, { headers: credential });
    if (res.status !== 202) return res;
    await res.arrayBuffer();
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function servedOnceAfterFrontRun(
  t: Test,
  opts: { caip2: string; frontRun: (n: NetworkEntry, payment: PaymentPayload, credential: Record<string, string>) => Promise<{ theirs: Hex; oursSent: number }> },
) {
  const n = chain(opts.caip2);
  const payer = await fundedBuyer(n, opts.caip2, parseUnits('1', 6));
  const offer = await offerOn(opts.caip2);
  const merchant = offer.payTo as Address;
  const merchantBefore = await stableBalance(n, merchant);
  const payment = await officialPayment(payer, offer);
  const credential = { 'payment-signature': encodePaymentSignatureHeader(payment as Parameters<typeof encodePaymentSignatureHeader>[0]) };
  const callsBefore = fixtures.calls;
  const sendsBefore = await txCount(n, gwRelayers.accounts);

  const { theirs, oursSent } = await opts.frontRun(n, payment, credential);
  const res = await buyUntilFinal(credential);
  const text = await res.text();
  t.equal(res.status, 200, `the buyer is served: ${text.slice(0, 200)}`);
  const settled = decodePaymentResponseHeader(res.headers.get('payment-response') as string);
  t.same([settled.success, settled.transaction], [true, theirs], "PAYMENT-RESPONSE names the front-runner's transaction");
  t.equal(fixtures.calls - callsBefore, 1, 'exactly one upstream call');
  t.equal(await stableBalance(n, payer.address), parseUnits('1', 6) - PRICE, 'the payer was charged once');
  t.equal((await stableBalance(n, merchant)) - merchantBefore, PRICE, 'the merchant was paid once');
  t.equal((await txCount(n, gwRelayers.accounts)) - sendsBefore, oursSent, 'no settlement sent after the front-run was seen');

  const replay = await fetch(url, { headers: credential });
  await replay.arrayBuffer();
  t.equal(replay.status, 402, 'the credential buys nothing more');
  t.equal(fixtures.calls - callsBefore, 1, 'still one upstream call');
}

t.test('gateway, EIP-3009 on eip155:84532: a copy of our pending settlement mined first; the same credential is served once', async (t) => {
  await servedOnceAfterFrontRun(t, {
    caip2: CAIP2.baseSepolia,
    frontRun: async (n, _payment, credential) => {
      const attacker = await frontRunner(n);
      await pauseMining(t, n);
      const callsBefore = fixtures.calls;
      const pending = await fetch(url, { headers: credential });
      const body = (await pending.json()) as { status: string; transaction: Hex };
      t.same([pending.status, body.status], [202, 'pending'], 'pending while unmined');
      t.equal(fixtures.calls, callsBefore, 'nothing served yet');
      const theirs = await copyFromMempool(n, attacker, body.transaction);
      await mineFrontRunFirst(t, n, theirs, body.transaction);
      return { theirs, oursSent: 1 };
    },
  });
});

t.test("gateway, Permit2 on eip155:4663: the buyer's payment settled by someone else before the gateway saw it; the buyer is served once", async (t) => {
  await servedOnceAfterFrontRun(t, {
    caip2: CAIP2.stockChain,
    frontRun: async (n, payment) => ({ theirs: await submitDirectly(n, await frontRunner(n), payment.payload, n.stablecoin.address), oursSent: 0 }),
  });
});
