// Gas burnt through a contract wallet (issue 21, finding 1). A payer contract whose ERC-1271 `isValidSignature` says
// "valid" only where a simulation runs makes every settlement revert on chain, at our relayers' expense, and its
// money never moves, so it can do it forever. Measured from outside: the relayers' transactions in the blocks mined
// during the test (receipts, gas), the wallets' balances, the answers. The line held: at most 2 reverted relayer
// transactions for any number of contracts of one code, however many payments arrive at once; none at all for a
// contract that lies about the gas price; an honest buyer paying in the same window is served.
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import solc from 'solc';
import { parseEther, parseUnits, toHex, type Abi, type Address, type Hex, type LocalAccount } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { CAIP2 } from '../../src/chain/canonical.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { stablecoinArtifact } from '../../src/devnet/contracts/artifacts/index.ts';
import { SOLC_SETTINGS } from '../../src/devnet/contracts/compile.ts';
import { startFixtureUpstreams } from '../../src/devnet/fixtures/server.ts';
import type { PaymentPayload, PaymentRequirements } from '../../src/protocol/x402/types.ts';
import { clientsFor, freshAccount, tester } from '../helpers/devnet.ts';
import { signTransferAuthorization } from '../helpers/eip3009.ts';
import { officialPayment, postJson, requirementsFor, stableBalance } from '../helpers/payments.ts';
import { spawnOwnDevnet } from '../helpers/spawn-devnet.ts';
import { spawnFacilitator, type SpawnedFacilitator } from '../helpers/spawn-facilitator.ts';
import { tempDir } from '../helpers/temp-dir.ts';

// Blocks are part of the attack (RandaoLiar): this file's own chains, mined only by what it does.
const devnet = await spawnOwnDevnet('contract-gas');
t.teardown(() => devnet.stop());
const funder = tester('spare');
const CAIP = CAIP2.base;
const n = devnet.manifest.networks[CAIP] as NetworkEntry;
const { pub, wallet } = clientsFor(n, funder);
const WALLET_FUNDS = parseUnits('1', 6);

type Compiled = { abi: Abi; bytecode: Hex };
function compileLiars(): Record<'GaslessLiar' | 'RandaoLiar' | 'RandaoBeacon' | 'GasBurner', Compiled> {
  const content = readFileSync(new URL('../fixtures/lying-wallets/LyingWallets.sol', import.meta.url), 'utf8');
  const input = { language: 'Solidity', sources: { 'LyingWallets.sol': { content } }, settings: { ...SOLC_SETTINGS, outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } } } };
  const out = JSON.parse(solc.compile(JSON.stringify(input))) as {
    errors?: Array<{ severity: string; formattedMessage: string }>;
    contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
  };
  const errors = (out.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length) throw new Error(errors.map((e) => e.formattedMessage).join('\n'));
  const of = (name: string): Compiled => {
    const c = out.contracts['LyingWallets.sol']?.[name];
    if (!c) throw new Error(`no ${name}`);
    return { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
  };
  return { GaslessLiar: of('GaslessLiar'), RandaoLiar: of('RandaoLiar'), RandaoBeacon: of('RandaoBeacon'), GasBurner: of('GasBurner') };
}
const liars = compileLiars();

async function mined(hash: Hex): Promise<void> {
  for (;;) {
    const receipt = await pub.getTransactionReceipt({ hash }).catch(() => undefined);
    if (receipt) {
      if (receipt.status !== 'success') throw new Error(`setup transaction ${hash} reverted`);
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `count` wallets of one kind (one runtime code), one owner, each holding {@link WALLET_FUNDS}. */
async function deployWallets(kind: 'GaslessLiar' | 'RandaoLiar' | 'GasBurner', owner: LocalAccount, count: number): Promise<Address[]> {
  const out: Address[] = [];
  for (let i = 0; i < count; i++) {
    const hash = await wallet.deployContract({ abi: liars[kind].abi, bytecode: liars[kind].bytecode, args: kind === 'RandaoLiar' ? [owner.address, beacon] : [owner.address] });
    await mined(hash);
    const address = (await pub.getTransactionReceipt({ hash })).contractAddress as Address;
    await mined(await wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'mint', args: [address, WALLET_FUNDS] }));
    out.push(address);
  }
  const codes = new Set(await Promise.all(out.map((a) => pub.getCode({ address: a }))));
  if (codes.size !== 1) throw new Error('the wallets of one kind must share their code');
  return out;
}

const beacon = await (async () => {
  const hash = await wallet.deployContract({ abi: liars.RandaoBeacon.abi, bytecode: liars.RandaoBeacon.bytecode, args: [] });
  await mined(hash);
  return (await pub.getTransactionReceipt({ hash })).contractAddress as Address;
})();

const domain = { name: n.stablecoin.name, version: n.stablecoin.version, chainId: n.chainId, verifyingContract: n.stablecoin.address };
const now = () => BigInt(Math.floor(Date.now() / 1000));

/** A payment from the contract wallet `from`, signed by its owner, for `req`. */
async function walletPayment(owner: LocalAccount, from: Address, req: PaymentRequirements): Promise<PaymentPayload> {
  const value = BigInt(req.amount);
  const s = await signTransferAuthorization(owner, domain, { from, to: req.payTo as Address, value, validAfter: 0n, validBefore: now() + 600n });
  const a = s.authorization;
  return {
    x402Version: 2,
    accepted: req,
    payload: { signature: s.signature, authorization: { from: a.from, to: a.to, value: value.toString(), validAfter: '0', validBefore: a.validBefore.toString(), nonce: a.nonce } },
  } as PaymentPayload;
}

async function freshRelayers(): Promise<{ keys: string; addresses: Address[] }> {
  const keys = [generatePrivateKey(), generatePrivateKey()];
  const addresses = keys.map((k) => privateKeyToAccount(k).address);
  for (const a of addresses) await rpcCall(n.rpcUrl, 'anvil_setBalance', [a, toHex(parseEther('10'))]);
  return { keys: keys.join(','), addresses };
}

/** What the relayers sent in the blocks after `fromBlock`: every transaction's receipt status and gas. */
async function relayerTxs(relayers: Address[], fromBlock: bigint): Promise<{ sent: number; reverted: number; revertedGas: bigint }> {
  const mine = new Set(relayers.map((r) => r.toLowerCase()));
  const head = await pub.getBlockNumber();
  let sent = 0;
  let reverted = 0;
  let revertedGas = 0n;
  for (let b = fromBlock + 1n; b <= head; b++) {
    const block = await pub.getBlock({ blockNumber: b, includeTransactions: true });
    for (const tx of block.transactions) {
      if (!mine.has(tx.from.toLowerCase())) continue;
      sent++;
      const receipt = await pub.getTransactionReceipt({ hash: tx.hash });
      if (receipt.status !== 'success') {
        reverted++;
        revertedGas += receipt.gasUsed;
      }
    }
  }
  return { sent, reverted, revertedGas };
}

/** The attacker arms its wallets: from now until the next block, every simulation finds them valid. */
async function arm(): Promise<void> {
  await mined(await wallet.writeContract({ address: beacon, abi: liars.RandaoBeacon.abi, functionName: 'arm', args: [] }));
}

const fixtures = await startFixtureUpstreams({ host: '127.0.0.1', port: 0 });
t.teardown(() => fixtures.close());

const facRelayers = await freshRelayers();
const facDataDir = tempDir('contract-gas-fac');
const facEnv = {
  GATE402_RELAYER_KEYS: facRelayers.keys,
  // The facilitator's own per-payer and per-client buckets out of the way: the revert budget alone must hold the line.
  GATE402_FACILITATOR_RATE_CAPACITY: '100000',
  GATE402_FACILITATOR_RATE_PER_SECOND: '100000',
  GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '100000',
  GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '100000',
  GATE402_CONFIRM_DEADLINE_MS: '20000',
  GATE402_RECEIPT_POLL_MS: '50',
  // The settlement queue's wait bound out of the way too: a burst of 30 that a loaded machine spreads over more than
  // the default 500 ms was shed as queue_slow (load average 20), before the revert budget was ever asked.
  GATE402_SETTLE_QUEUE_WAIT_MS: '60000',
};
let fac: SpawnedFacilitator = await spawnFacilitator({ manifestPath: devnet.manifestPath, dataDir: facDataDir, env: facEnv });
t.teardown(() => fac.stop());

const gwRelayers = await freshRelayers();
const gw = await spawnFacilitator({
  part: 'gateway',
  manifestPath: devnet.manifestPath,
  env: {
    GATE402_RELAYER_KEYS: gwRelayers.keys,
    GATE402_CATALOG_UPSTREAM_BASE: new URL(fixtures.baseUrlFor('catjoke')).origin,
    GATE402_UPSTREAM_ALLOWLIST: '127.0.0.1',
    GATE402_BREAKER_THRESHOLD: '1000',
    GATE402_CONFIRM_DEADLINE_MS: '20000',
    GATE402_RECEIPT_POLL_MS: '50',
  },
});
t.teardown(() => gw.stop());
const url = `${gw.url}/m/catjoke/joke?params%5Btopic%5D=naps&lang=en`;

async function offer(): Promise<PaymentRequirements> {
  const unpaid = await fetch(url);
  await unpaid.arrayBuffer();
  const o = decodePaymentRequiredHeader(unpaid.headers.get('payment-required') as string).accepts.find((x) => x.network === CAIP);
  if (!o) throw new Error(`no ${CAIP} offer`);
  return o as PaymentRequirements;
}

type Answer = { status: number; reason: string; body: string; retryAfter: string | null };

async function facSettle(p: PaymentPayload, req: PaymentRequirements): Promise<Answer> {
  const a = await postJson(`${fac.url}/settle`, { x402Version: 2, paymentPayload: p, paymentRequirements: req });
  const j = a.json as { success?: boolean; errorReason?: string };
  return { status: a.status, reason: j.success ? 'settled' : String(j.errorReason), body: JSON.stringify(a.json), retryAfter: null };
}

async function gwBuy(p: PaymentPayload): Promise<Answer> {
  const res = await fetch(url, { headers: { 'payment-signature': encodePaymentSignatureHeader(p as Parameters<typeof encodePaymentSignatureHeader>[0]) } });
  // The body, and the settlement's answer in PAYMENT-RESPONSE (a 402 carries the refusal's message there).
  const header = res.headers.get('payment-response');
  const body = `${await res.text()} ${header ? JSON.stringify(decodePaymentResponseHeader(header)) : ''}`;
  const reason = res.status === 200 ? 'settled' : (/"(?:code|reason)":"([a-z_0-9]+)"/.exec(body)?.[1] ?? /payment refused: ([a-z_0-9]+)/.exec(body)?.[1] ?? String(res.status));
  return { status: res.status, reason, body, retryAfter: res.headers.get('retry-after') };
}

/** An honest buyer (an EOA with money) on the facilitator and on the gateway, paying while the attack runs. */
async function honestBuyer(): Promise<LocalAccount> {
  const buyer = freshAccount();
  await mined(await wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'mint', args: [buyer.address, parseUnits('1', 6)] }));
  return buyer;
}

const balances = (addresses: Address[]) => Promise.all(addresses.map((a) => stableBalance(n, a)));

const SHED = ['queue_full', 'queue_slow', 'relayers_busy'];

/** Every refusal of a contract payer must say nothing was charged and carry one of the expected codes. */
function refusedCleanly(t: Test, where: string, answers: Answer[], allowed: readonly string[]): void {
  // A 503 of backpressure (settlement behind on a loaded machine) also charged nothing: the payment never started.
  const wrong = answers.filter((a) => a.reason !== 'settled' && !allowed.includes(a.reason) && !(a.status === 503 && SHED.includes(a.reason)));
  t.same(
    wrong.map((a) => `${a.status} ${a.body.slice(0, 200)}`),
    [],
    `${where}: every refusal is one of ${allowed.join(', ')}`,
  );
}

t.test('a wallet valid only at gas price 0: simulated as sent (with our fees), refused, no transaction at all', async (t) => {
  const owner = freshAccount();
  const wallets = await deployWallets('GaslessLiar', owner, 3);
  const before = await balances(wallets);
  const start = await pub.getBlockNumber();
  const payTo = freshAccount().address;
  const req = requirementsFor(CAIP, n, payTo, '10000');
  const gwReq = await offer();
  const payments = await Promise.all(wallets.flatMap((w) => Array.from({ length: 10 }, () => walletPayment(owner, w, req))));
  const gwPayments = await Promise.all(wallets.flatMap((w) => Array.from({ length: 10 }, () => walletPayment(owner, w, gwReq))));
  const [facAnswers, gwAnswers] = await Promise.all([Promise.all(payments.map((p) => facSettle(p, req))), Promise.all(gwPayments.map((p) => gwBuy(p)))]);
  t.same(
    facAnswers.filter((a) => a.status !== 200 || a.reason === 'settled').map((a) => a.body),
    [],
    'facilitator: 30 answers 200 success:false',
  );
  t.ok(
    gwAnswers.every((a) => a.status === 402 || a.status === 503),
    `gateway: 30 answers 402 or 503 (${[...new Set(gwAnswers.map((a) => `${a.status} ${a.reason}`))].join('; ')})`,
  );
  refusedCleanly(t, 'facilitator', facAnswers, ['invalid_exact_evm_signature', 'invalid_exact_evm_transaction_simulation_failed', 'contract_payer_one_at_a_time']);
  refusedCleanly(t, 'gateway', gwAnswers, ['invalid_exact_evm_signature', 'invalid_exact_evm_transaction_simulation_failed', 'contract_payer_one_at_a_time']);
  const fac = await relayerTxs(facRelayers.addresses, start);
  const gwTxs = await relayerTxs(gwRelayers.addresses, start);
  t.same([fac.sent, gwTxs.sent], [0, 0], 'neither the facilitator nor the gateway sent a transaction');
  t.same(await balances(wallets), before, "the wallets' money never moved");
});

/**
 * Sends bursts of payments from every wallet at once through `pay` until one settlement reverted on chain (the
 * attack landed once), then one more burst: every answer after the revert is a refusal, and the relayers' reverted
 * transactions stay at most 2.
 */
async function simulationLiarAttack(
  t: Test,
  where: string,
  relayers: Address[],
  req: () => Promise<PaymentRequirements>,
  pay: (p: PaymentPayload, req: PaymentRequirements) => Promise<Answer>,
  honest: (buyer: LocalAccount) => Promise<Answer>,
): Promise<{ wallets: Address[]; owner: LocalAccount }> {
  const owner = freshAccount();
  const wallets = await deployWallets('RandaoLiar', owner, 4);
  const before = await balances(wallets);
  const buyer = await honestBuyer();
  const start = await pub.getBlockNumber();
  const answers: Answer[] = [];
  let honestAnswer: Answer | undefined;
  for (let round = 0; round < 6; round++) {
    const r = await req();
    const burst = await Promise.all(wallets.flatMap((w) => Array.from({ length: 5 }, () => walletPayment(owner, w, r))));
    await arm();
    const [got, h] = await Promise.all([Promise.all(burst.map((p) => pay(p, r))), round === 0 ? honest(buyer) : Promise.resolve(undefined)]);
    answers.push(...got);
    honestAnswer ??= h;
    if ((await relayerTxs(relayers, start)).reverted > 0) break;
  }
  const landed = await relayerTxs(relayers, start);
  t.ok(landed.reverted >= 1, `${where}: the attack made a settlement revert on chain (${landed.reverted}, ${landed.revertedGas} gas): the simulation was fooled`);
  // Many more, from the same wallets and from new wallets of the same code: all refused before anything is sent.
  const more = await deployWallets('RandaoLiar', owner, 2);
  const r = await req();
  const burst = await Promise.all([...wallets, ...more].flatMap((w) => Array.from({ length: 8 }, () => walletPayment(owner, w, r))));
  await arm();
  const after = await Promise.all(burst.map((p) => pay(p, r)));
  const banned = after.filter((a) => a.reason === 'payer_reverted_before');
  t.ok(banned.length > 0, `${where}: refused as payer_reverted_before (${banned.length} of ${after.length})`);
  t.same(
    after.filter((a) => a.reason !== 'payer_reverted_before' && !(a.status === 503 && SHED.includes(a.reason))).map((a) => `${a.status} ${a.body.slice(0, 200)}`),
    [],
    `${where}: ${after.length} payments after the revert, from 6 wallets of the code (2 new), all refused before anything was sent (the rest shed: settlement behind)`,
  );
  t.ok(
    banned.every((a) => /nothing was charged/.test(a.body)),
    `${where}: each refusal says nothing was charged`,
  );
  refusedCleanly(
    t,
    where,
    [...answers, ...after],
    ['payer_reverted_before', 'contract_payer_one_at_a_time', 'invalid_exact_evm_signature', 'invalid_exact_evm_transaction_simulation_failed', 'invalid_exact_evm_transaction_failed'],
  );
  const total = await relayerTxs(relayers, start);
  t.ok(
    total.reverted <= 2,
    `${where}: ${answers.length + after.length} payments from ${wallets.length + more.length} wallets of one code: ${total.reverted} reverted relayer transactions (at most 2), ${total.revertedGas} gas`,
  );
  t.same(await balances(wallets), before, `${where}: the wallets' money never moved`);
  t.equal(honestAnswer?.reason, 'settled', `${where}: the honest buyer paying in the same window is served (${honestAnswer?.body.slice(0, 200)})`);
  return { wallets, owner };
}

t.test('wallets valid only in a simulation, at the facilitator: at most 2 reverted transactions for any number of wallets of one code', async (t) => {
  const payTo = freshAccount().address;
  const req = async () => requirementsFor(CAIP, n, payTo, '10000');
  const { owner } = await simulationLiarAttack(t, 'facilitator /settle', facRelayers.addresses, req, facSettle, async (buyer) => facSettle(await officialPayment(buyer, await req()), await req()));

  // A restart keeps the ban: the records are in the Store.
  await fac.stop();
  fac = await spawnFacilitator({ manifestPath: devnet.manifestPath, dataDir: facDataDir, env: facEnv });
  const [fresh] = await deployWallets('RandaoLiar', owner, 1);
  const start = await pub.getBlockNumber();
  await arm();
  const r = await req();
  const answer = await facSettle(await walletPayment(owner, fresh as Address, r), r);
  t.equal(answer.reason, 'payer_reverted_before', `after a restart, a new wallet of the banned code is refused (${answer.body.slice(0, 200)})`);
  const verified = await postJson(`${fac.url}/verify`, { x402Version: 2, paymentPayload: await walletPayment(owner, fresh as Address, r), paymentRequirements: r });
  t.match(verified, { status: 200, json: { isValid: false, invalidReason: 'payer_reverted_before' } }, '/verify says so too');
  t.equal((await relayerTxs(facRelayers.addresses, start)).sent, 0, 'and nothing was sent');
  const metrics = await fetch(`${fac.url}/metrics`).then((res) => res.text());
  t.match(metrics, /gate402_revert_budget_refusals_total\{kind="code_banned"\} [1-9]/, 'the refusal is counted');
});

t.test('wallets valid only in a simulation, on the paid route: at most 2 reverted transactions, 402 or 503 with nothing charged', async (t) => {
  // A buyer told 503 (backpressure: the flood fills the queue; fair admission is another finding) or 202 sends the
  // same credential again after a pause, as told; nothing is charged twice.
  const buyOnce = async (buyer: LocalAccount) => {
    const payment = await officialPayment(buyer, await offer());
    let answer = await gwBuy(payment);
    for (let i = 0; i < 20 && (answer.status === 503 || answer.status === 202); i++) {
      await new Promise((r) => setTimeout(r, 500));
      answer = await gwBuy(payment);
    }
    return answer;
  };
  await simulationLiarAttack(t, 'gateway paid route', gwRelayers.addresses, offer, (p) => gwBuy(p), buyOnce);
  const metrics = await fetch(`${gw.url}/metrics`).then((res) => res.text());
  t.match(metrics, /gate402_settlement_reverted_gas_total\{network="eip155:8453"\} [1-9]/, 'the gas burnt is counted');
});

t.test('a wallet whose signature check burns gas, simulated at /verify again and again, does not raise the gas limit of the batches of key-signed payments after it', async (t) => {
  // Batches of key-signed payments are simulated once at a gas limit made from what such calls were estimated to cost
  // on this network; a contract payer's simulation (which anyone can have run at /verify) must never feed that figure.
  const relayers = await freshRelayers();
  const batching = await spawnFacilitator({
    manifestPath: devnet.manifestPath,
    env: { ...facEnv, GATE402_RELAYER_KEYS: relayers.keys, GATE402_BATCH_WINDOW_MS: '1500', GATE402_BATCH_EAGER: 'false' },
  });
  t.teardown(() => batching.stop());
  const owner = freshAccount();
  const [burner] = (await deployWallets('GasBurner', owner, 1)) as [Address];
  const checkGas = await pub.estimateContractGas({ address: burner, abi: liars.GasBurner.abi, functionName: 'isValidSignature', args: [`0x${'11'.repeat(32)}`, '0x'] });
  t.ok(checkGas > 250_000n, `the wallet's signature check alone costs ${checkGas} gas`);
  const req = requirementsFor(CAIP, n, freshAccount().address, '10000');
  const burnAtVerify = async () => {
    const verified = await postJson(`${batching.url}/verify`, { x402Version: 2, paymentPayload: await walletPayment(owner, burner, req), paymentRequirements: req });
    t.match(verified, { status: 200, json: { isValid: true } }, 'the gas-burning wallet is simulated at /verify, and valid');
  };
  /** Four key-signed payments sent together: one batch; its gas limit and the gas it used. */
  const batch = async () => {
    const buyers: LocalAccount[] = [];
    for (let i = 0; i < 4; i++) buyers.push(await honestBuyer()); // one funder, one nonce at a time
    const answers = await Promise.all(
      buyers.map(
        async (b) =>
          (await postJson(`${batching.url}/settle`, { x402Version: 2, paymentPayload: await officialPayment(b, req), paymentRequirements: req })).json as { success?: boolean; transaction: Hex },
      ),
    );
    t.same(
      answers.map((a) => a.success),
      [true, true, true, true],
      'four honest buyers settled',
    );
    const hashes = [...new Set(answers.map((a) => a.transaction))];
    t.equal(hashes.length, 1, 'in one batch');
    const hash = hashes[0] as Hex;
    const [tx, receipt] = await Promise.all([pub.getTransaction({ hash }), pub.getTransactionReceipt({ hash })]);
    return { limit: tx.gas, used: receipt.gasUsed };
  };
  for (let i = 0; i < 3; i++) await burnAtVerify();
  const first = await batch();
  t.ok(first.limit < 2n * first.used, `the first batch after it: limit ${first.limit} for ${first.used} gas used (the burner's check alone: ${checkGas})`);
  for (let i = 0; i < 3; i++) await burnAtVerify();
  const second = await batch();
  t.ok(second.limit < 2n * second.used, `a batch run at the gas its calls were estimated to cost before: limit ${second.limit} for ${second.used} used`);
});
