/**
 * Issue 24: a receiver's channel operations at the open facilitator's /settle (`claim`, `settle`, `refund`, as the
 * official server's channel manager sends them) are sent by our relayers, so each must move at least what its gas
 * costs: the live price floor, at the gas its simulation says it uses. Someone who is payer, receiver and receiver
 * authorizer of a channel of their own signs what they like: a flood of claims that each raise `totalClaimed` by 1,
 * a claim of one channel in 100 rows, a sweep of one claimed unit (claimed with their own gas), a refund of one unit.
 * Each is refused `amount_below_price_floor` before anything is signed: the relayers' nonces and balances do not move.
 * A claim, sweep and refund worth more than the floor are sent and move the money; a refund of everything left is
 * taken whatever its size. Run off the devnet (networks from GATE402_NETWORKS_FILE, the operator's own relayer keys
 * and native coin prices), where these operations used to be refused whatever they moved; on the shared devnet's chains.
 */
import t from 'tap';
import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeFunctionData, parseEther, toHex, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { BATCH_SETTLEMENT_ADDRESS, CAIP2 } from '../../src/chain/canonical.ts';
import { rpcCall } from '../../src/chain/rpc.ts';
import { DEVNET_ROLES, devnetAccount } from '../../src/devnet/accounts.ts';
import { stablecoinArtifact } from '../../src/devnet/contracts/artifacts/index.ts';
import { batchSettlementAbi } from '../../src/schemes/batch-settlement/abi.ts';
import { claimBatchTypedData, voucherClaimArgs, type VoucherClaim } from '../../src/schemes/batch-settlement/claim-batch.ts';
import type { ChannelConfig } from '../../src/schemes/batch-settlement/channel-config.ts';
import { refundTypedData } from '../../src/schemes/batch-settlement/refund.ts';
import { voucherTypedData } from '../../src/schemes/batch-settlement/voucher.ts';
import { channelOnChain, newMerchant, offerOn, officialChannelClient, officialChannelPayment } from '../helpers/channels.ts';
import { clientsFor, freePort, freshAccount, network, testDevnet } from '../helpers/devnet.ts';
import { BIN, offDevnetEnv } from '../helpers/spawn-devnet.ts';
import { postJson, stableBalance } from '../helpers/payments.ts';
import { killOnExit, tempDir } from '../helpers/temp-dir.ts';

const manifest = testDevnet();
const base = network(manifest, CAIP2.base);
const dir = tempDir('receiver-operations-floor');
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

// The native coin at 10 USD: the floor of a claim is then about 0.0006-0.002 USD (600-2,000 units) at anvil's 1-3
// gwei, and of a transaction's least gas (21,000) at least 315 units.
const NATIVE_USD = '10';
const PRICE = 20_000n;
const DEPOSIT = 200_000n;
const FLOOD = 50;
const ROUNDS = 3;

// Fresh relayer keys, used by nothing else: their nonces and balances move only with this facilitator's transactions.
const relayerKeys = [generatePrivateKey(), generatePrivateKey()];
const relayers = relayerKeys.map((k) => privateKeyToAccount(k).address);
for (const n of Object.values(manifest.networks)) for (const r of relayers) await rpcCall(n.rpcUrl, 'anvil_setBalance', [r, toHex(parseEther('10'))]);

const networksFile = join(dir, 'networks.json');
writeFileSync(networksFile, JSON.stringify({ networks: manifest.networks }));
const port = await freePort();
const env = offDevnetEnv({
  GATE402_NETWORKS_FILE: networksFile,
  GATE402_DATA_DIR: join(dir, 'data'),
  GATE402_FACILITATOR_PORT: String(port),
  GATE402_RELAYER_KEYS: relayerKeys.join(','),
  GATE402_LOG_LEVEL: 'warn',
  GATE402_FACILITATOR_RATE_CAPACITY: '10000',
  GATE402_FACILITATOR_RATE_PER_SECOND: '10000',
  GATE402_FACILITATOR_PAYER_RATE_CAPACITY: '1000',
  GATE402_FACILITATOR_PAYER_RATE_PER_SECOND: '1000',
  ...Object.fromEntries(Object.values(manifest.networks).map((n) => [`GATE402_NATIVE_USD_EIP155_${n.chainId}`, NATIVE_USD])),
});
const child: ChildProcess = spawn(process.execPath, [BIN, 'facilitator'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
killOnExit(child);
let stderr = '';
child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
t.teardown(async () => {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    await exited;
  }
});
const url = `http://127.0.0.1:${port}`;
// Booting on a loaded machine takes a while: wide margins.
for (const deadline = Date.now() + 120_000; ; ) {
  if (child.exitCode !== null) throw new Error(`the facilitator exited ${child.exitCode}: ${stderr}`);
  const up = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) }).then(
    (r) => r.ok,
    () => false,
  );
  if (up) break;
  if (Date.now() > deadline) throw new Error(`the facilitator did not become healthy: ${stderr}`);
  await new Promise((r) => setTimeout(r, 200));
}

const { pub } = clientsFor(base, freshAccount());
/** What an attacker would cost us, as the chain sees it: every relayer's nonce and balance. */
const relayerState = async () => Promise.all(relayers.map(async (r) => [await pub.getTransactionCount({ address: r, blockTag: 'latest' }), await pub.getBalance({ address: r })] as const));
const relayerTxs = async () => (await relayerState()).reduce((sum, [nonce]) => sum + nonce, 0);

/** Mints stablecoin as the token's owner through anvil's impersonation (the node picks the nonce: no other test's send collides). */
async function mint(to: Address, amount: bigint): Promise<void> {
  const owner = devnetAccount(DEVNET_ROLES.deployer).address;
  await rpcCall(base.rpcUrl, 'anvil_impersonateAccount', [owner]);
  const data = encodeFunctionData({ abi: stablecoinArtifact.abi, functionName: 'mint', args: [to, amount] });
  const hash = await rpcCall<Hex>(base.rpcUrl, 'eth_sendTransaction', [{ from: owner, to: base.stablecoin.address, data }]);
  if ((await pub.waitForTransactionReceipt({ hash })).status !== 'success') throw new Error('mint reverted');
}

type Answer = { success: boolean; transaction: string; status?: string; errorReason?: string; errorMessage?: string; amount?: string };
/** /settle, asked again while the answer is pending (a loaded chain may take longer than the facilitator waits). */
async function settle(body: unknown): Promise<Answer> {
  for (;;) {
    const r = await postJson(`${url}/settle`, body);
    if (r.status !== 200) throw new Error(`/settle answered ${r.status}: ${JSON.stringify(r.json)}`);
    const answer = r.json as Answer;
    if (answer.status !== 'pending' || answer.transaction === '') return answer;
    await new Promise((res) => setTimeout(res, 200));
  }
}

/** A channel of the attacker's own (payer, receiver and receiver authorizer at once), deposited through this facilitator. */
async function ownChannel() {
  const payer = freshAccount();
  await mint(payer.address, DEPOSIT);
  const merchant = newMerchant();
  const offer = offerOn(base, merchant, { price: PRICE, deposit: DEPOSIT, method: 'eip3009' });
  const payment = await officialChannelPayment(officialChannelClient(base, payer), offer);
  const deposited = await settle({ x402Version: 2, paymentPayload: payment, paymentRequirements: offer });
  if (!deposited.success) throw new Error(`the deposit failed: ${JSON.stringify(deposited)}`);
  const config = payment.payload.channelConfig as ChannelConfig;
  const channelId = (payment.payload.voucher as { channelId: Hex }).channelId;
  // The envelope the official channel manager sends its operations in.
  const manager = { scheme: 'batch-settlement', network: CAIP2.base, asset: base.stablecoin.address, amount: '0', payTo: merchant.receiver, maxTimeoutSeconds: 0, extra: {} };
  const body = (payload: Record<string, unknown>) => ({ x402Version: 2, paymentPayload: { x402Version: 2, accepted: manager, payload }, paymentRequirements: manager });
  const row = async (total: bigint): Promise<VoucherClaim> => ({
    config,
    maxClaimableAmount: total,
    signature: await payer.signTypedData(voucherTypedData({ channelId, maxClaimableAmount: total }, base.chainId)),
    totalClaimed: total,
  });
  const signedRows = async (rows: VoucherClaim[]) => ({ rows, signature: await merchant.authorizer.signTypedData(claimBatchTypedData(rows, base.chainId)) });
  /** A claim payload of rows raising the channel to each total, signed by its receiver authorizer. */
  const claim = async (totals: bigint[]) => {
    const { rows, signature } = await signedRows(await Promise.all(totals.map(row)));
    return body({
      type: 'claim',
      claims: rows.map((r) => ({ voucher: { channel: config, maxClaimableAmount: r.maxClaimableAmount.toString() }, signature: r.signature, totalClaimed: r.totalClaimed.toString() })),
      claimAuthorizerSignature: signature,
    });
  };
  const sweep = () => body({ type: 'settle', receiver: merchant.receiver, token: base.stablecoin.address });
  const refund = async (amount: bigint, nonce: bigint) =>
    body({
      type: 'refund',
      channelConfig: config,
      amount: amount.toString(),
      refundNonce: nonce.toString(),
      refundAuthorizerSignature: await merchant.authorizer.signTypedData(refundTypedData({ channelId, nonce, amount }, base.chainId)),
    });
  /** The receiver authorizer claims with its own gas (what the floor cannot stop, and does not cost us). */
  const claimOwnGas = async (total: bigint) => {
    await rpcCall(base.rpcUrl, 'anvil_setBalance', [merchant.authorizer.address, toHex(parseEther('1'))]);
    const { rows, signature } = await signedRows([await row(total)]);
    const { wallet } = clientsFor(base, merchant.authorizer);
    const hash = await wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'claimWithSignature', args: [voucherClaimArgs(rows), signature] });
    if ((await pub.waitForTransactionReceipt({ hash })).status !== 'success') throw new Error('the own claim reverted');
  };
  return { payer, merchant, channelId, claim, sweep, refund, claimOwnGas };
}

const channel = await ownChannel();

t.test(`${ROUNDS} floods of ${FLOOD} concurrent 1-unit claims: each refused below the floor, nothing sent, no gas spent`, async (t) => {
  const before = await relayerState();
  for (let round = 0; round < ROUNDS; round++) {
    // Each claim a different one (its own total), all at once, as a farm of our gas would send them.
    const claims = await Promise.all(Array.from({ length: FLOOD }, (_, i) => channel.claim([BigInt(round * FLOOD + i + 1)])));
    const answers = await Promise.all(claims.map((c) => settle(c)));
    const reasons = new Set(answers.map((a) => a.errorReason));
    t.same([...reasons], ['amount_below_price_floor'], `round ${round + 1}: every claim refused amount_below_price_floor`);
    t.ok(
      answers.every((a) => !a.success && a.transaction === ''),
      'none was sent',
    );
  }
  const refused = await settle(await channel.claim([1n]));
  t.match(
    refused.errorMessage,
    /the claim moves 1 \(smallest units of the network's stablecoin\), less than its gas costs: the price floor on eip155:8453 is/,
    'the refusal says what it moved and the floor',
  );
  // Above the floor of a transaction's least gas (21,000), below that of the gas a claim uses (its estimate, ~40k+).
  const least = BigInt(/\((\d+) atoms\): 21000 gas/.exec(refused.errorMessage ?? '')?.[1] ?? '0');
  t.ok(least > 0n, `a transaction's least gas is worth ${least} units here`);
  const measured = await settle(await channel.claim([(least * 6n) / 5n]));
  t.equal(measured.errorReason, 'amount_below_price_floor', `a claim of ${(least * 6n) / 5n} is refused: ${measured.errorMessage}`);
  t.match(measured.errorMessage, /at the gas its simulation used/, 'at the gas its estimate measured');
  // One channel in 100 rows raising it to 1, 2 ... 100 moves 100, not their sum (5,050): refused as well.
  const rows = await settle(await channel.claim(Array.from({ length: 100 }, (_, i) => BigInt(i + 1))));
  t.equal(rows.errorReason, 'amount_below_price_floor', 'a claim of one channel in 100 rows moves its highest row only: refused');
  t.same(await relayerState(), before, "the relayers' nonces and balances are as they were");
  t.same(await channelOnChain(base, channel.channelId), { balance: DEPOSIT, totalClaimed: 0n }, 'the channel: nothing claimed');
});

t.test('a claim and a sweep worth more than the floor are sent and pay the receiver; a sweep of 1 claimed unit is refused', async (t) => {
  const txs = await relayerTxs();
  const claimed = await settle(await channel.claim([PRICE]));
  t.equal(claimed.success, true, `the claim of ${PRICE} is sent: ${JSON.stringify(claimed)}`);
  t.same(await channelOnChain(base, channel.channelId), { balance: DEPOSIT, totalClaimed: PRICE }, "the channel's totalClaimed moved");
  const swept = await settle(channel.sweep());
  t.equal(swept.success, true, `the sweep of ${PRICE} is sent: ${JSON.stringify(swept)}`);
  t.equal(await stableBalance(base, channel.merchant.receiver), PRICE, 'the receiver holds what was claimed');
  t.equal(await relayerTxs(), txs + 2, 'two transactions: the claim and the sweep');

  // One more unit claimed by the receiver side with its own gas, then a sweep of it asked of us: refused.
  await channel.claimOwnGas(PRICE + 1n);
  const before = await relayerState();
  const dust = await settle(channel.sweep());
  t.equal(dust.errorReason, 'amount_below_price_floor', `a sweep of 1 unit is refused: ${dust.errorMessage}`);
  t.match(dust.errorMessage, /the settle moves 1 /);
  t.equal(await stableBalance(base, channel.merchant.receiver), PRICE, "the receiver's balance is as it was");
  t.same(await relayerState(), before, "the relayers' nonces and balances are as they were");
});

t.test('a partial refund below the floor is refused; one above it is sent; a refund of everything left is taken', async (t) => {
  const before = await relayerState();
  const payerBefore = await stableBalance(base, channel.payer.address);
  const dust = await settle(await channel.refund(1n, 0n));
  t.equal(dust.errorReason, 'amount_below_price_floor', `a refund of 1 unit is refused: ${dust.errorMessage}`);
  t.same(await relayerState(), before, 'nothing sent');
  t.equal(await stableBalance(base, channel.payer.address), payerBefore, 'the payer got nothing back');

  const left = DEPOSIT - PRICE - 1n;
  const part = 50_000n;
  const partial = await settle(await channel.refund(part, 0n));
  t.equal(partial.success, true, `a refund of ${part} is sent: ${JSON.stringify(partial)}`);
  t.equal((await stableBalance(base, channel.payer.address)) - payerBefore, part, 'the payer got it back');
  // What is left, asked in full (any amount at least what is left returns all of it): taken whatever its size.
  const whole = await settle(await channel.refund(left - part, 1n));
  t.equal(whole.success, true, `the refund of the rest is sent: ${JSON.stringify(whole)}`);
  t.equal((await stableBalance(base, channel.payer.address)) - payerBefore, left, 'the payer got everything unclaimed back');
  t.same(await channelOnChain(base, channel.channelId), { balance: PRICE + 1n, totalClaimed: PRICE + 1n }, 'the channel keeps exactly what was claimed');
  t.equal(
    (await relayerState()).reduce((sum, [nonce]) => sum + nonce, 0),
    before.reduce((sum, [nonce]) => sum + nonce, 0) + 2,
    'two transactions: the two refunds',
  );
});

t.test('a refund of a dust remainder is taken: a full refund is never refused for its size', async (t) => {
  const small = await ownChannel();
  // The receiver side claims all but 3 units with its own gas; a refund of those 3 empties the channel.
  await small.claimOwnGas(DEPOSIT - 3n);
  const txs = await relayerTxs();
  const payerBefore = await stableBalance(base, small.payer.address);
  const partial = await settle(await small.refund(1n, 0n));
  t.equal(partial.errorReason, 'amount_below_price_floor', '1 of the 3 left is refused');
  const whole = await settle(await small.refund(3n, 0n));
  t.equal(whole.success, true, `all 3 left are refunded: ${JSON.stringify(whole)}`);
  t.equal((await stableBalance(base, small.payer.address)) - payerBefore, 3n, 'the payer got the 3 back');
  t.equal(await relayerTxs(), txs + 1, 'one transaction');
});
