// gate402's x402 batch-settlement contracts on real anvil chains, driven by the official @x402/evm client (deposits,
// vouchers) and checked against the official facilitator's verify: deposits through both collectors, a claim of many
// channels in one transaction, the sweep to the receiver, refunds with their nonce, and (on a chain of its own, whose
// clock the test moves) the payer's timed withdrawal. Gas of each is printed beside the scheme's published figures.
import t from 'tap';
import { BatchSettlementEvmScheme as OfficialClient } from '@x402/evm/batch-settlement/client';
import { BatchSettlementEvmScheme as OfficialFacilitator } from '@x402/evm/batch-settlement/facilitator';
import { encodeFunctionData, keccak256, maxUint256, parseEther, toHex, type Address, type Hex, type TransactionReceipt } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { BATCH_SETTLEMENT_ADDRESS, CAIP2, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS } from '../src/chain/canonical.ts';
import type { NetworkEntry } from '../src/chain/network-types.ts';
import { rpcCall } from '../src/chain/rpc.ts';
import { DEVNET_ROLES, DEVNET_TEST_MNEMONIC, devnetAccount } from '../src/devnet/accounts.ts';
import { startAnvil } from '../src/devnet/anvil.ts';
import { erc3009DepositCollectorArtifact, permit2DepositCollectorArtifact, stablecoinArtifact, x402BatchSettlementArtifact } from '../src/devnet/contracts/artifacts/index.ts';
import { deployDevnet } from '../src/devnet/deploy.ts';
import { batchSettlementAbi } from '../src/schemes/batch-settlement/abi.ts';
import { checkChannelBinding, checkDepositAuthorizationTerms } from '../src/schemes/batch-settlement/binding.ts';
import { channelIdOf, type ChannelConfig } from '../src/schemes/batch-settlement/channel-config.ts';
import { claimBatchTypedData, voucherClaimArgs, type VoucherClaim } from '../src/schemes/batch-settlement/claim-batch.ts';
import { checkVoucherAgainstChannel } from '../src/schemes/batch-settlement/cumulative.ts';
import { depositCallArgs } from '../src/schemes/batch-settlement/deposit-call.ts';
import { parseBatchPayload, type BatchPayload, type DepositPayload } from '../src/schemes/batch-settlement/payload.ts';
import { BatchReason } from '../src/verify/batch-settlement-reasons.ts';
import { refundTypedData } from '../src/schemes/batch-settlement/refund.ts';
import { batchSettlementRequirements, type BatchSettlementRequirements } from '../src/schemes/batch-settlement/requirements.ts';
import { classifyVoucherSignature, voucherTypedData } from '../src/schemes/batch-settlement/voucher.ts';
import { clientsFor, network, testDevnet } from './helpers/devnet.ts';

const manifest = testDevnet();
const base = network(manifest, CAIP2.base);
const stock = network(manifest, CAIP2.stockChain);

const PRICE = 1000n;
const DEPOSIT = 1_000_000n;
/** The scheme's published gas figures (issue #24): claim of one channel, per channel in a claim of ten, settle, first deposit. */
const PUBLISHED = { claim1: 40_000n, claimPer10: 19_000n, settle: 31_000n, firstDeposit: 112_000n };

/**
 * A transaction's gas without its intrinsic part (21,000 plus 4 per zero and 16 per other calldata byte): the
 * execution gas a Foundry gas report shows, which is how the published figures read.
 */
async function executionGas(n: NetworkEntry, receipt: TransactionReceipt): Promise<bigint> {
  const tx = await clientsFor(n, fresh()).pub.getTransaction({ hash: receipt.transactionHash });
  let calldata = 0n;
  for (let i = 2; i < tx.input.length; i += 2) calldata += tx.input.slice(i, i + 2) === '00' ? 4n : 16n;
  return receipt.gasUsed - 21_000n - calldata;
}

async function gasLine(n: NetworkEntry, what: string, receipt: TransactionReceipt, per = 1n): Promise<string> {
  const execution = await executionGas(n, receipt);
  const each = per > 1n ? ` (${receipt.gasUsed / per} and ${execution / per} per channel)` : '';
  return `gas: ${what}: ${receipt.gasUsed} in all, ${execution} execution${each}`;
}

const fresh = (): PrivateKeyAccount => privateKeyToAccount(generatePrivateKey());
const randomSalt = (): Hex => keccak256(toHex(`${Math.random()}-${process.hrtime.bigint()}`));

async function giveGas(n: NetworkEntry, who: Address): Promise<void> {
  await rpcCall(n.rpcUrl, 'anvil_setBalance', [who, toHex(parseEther('10'))]);
}

/**
 * Mints stablecoin to `to` as the token's owner (the deployer), through anvil's impersonation so the node picks the
 * nonce: no other test sends from the deployer, and none of this file's sends can collide with another's.
 */
async function mint(n: NetworkEntry, to: Address, amount: bigint): Promise<void> {
  const owner = devnetAccount(DEVNET_ROLES.deployer).address;
  await rpcCall(n.rpcUrl, 'anvil_impersonateAccount', [owner]);
  const data = encodeFunctionData({ abi: stablecoinArtifact.abi, functionName: 'mint', args: [to, amount] });
  const hash = await rpcCall<Hex>(n.rpcUrl, 'eth_sendTransaction', [{ from: owner, to: n.stablecoin.address, data }]);
  const receipt = await clientsFor(n, fresh()).pub.waitForTransactionReceipt({ hash });
  if (receipt.status !== 'success') throw new Error('mint reverted');
}

const tokenBalance = (n: NetworkEntry, who: Address) => clientsFor(n, fresh()).pub.readContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'balanceOf', args: [who] });
const channelOf = async (n: NetworkEntry, id: Hex) => {
  const [balance, totalClaimed] = await clientsFor(n, fresh()).pub.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'channels', args: [id] });
  return { balance, totalClaimed };
};

/** Sends a call to the settlement contract from `from` and waits for its receipt (reverts included). */
async function send(n: NetworkEntry, from: PrivateKeyAccount, call: { functionName: string; args: readonly unknown[] }): Promise<TransactionReceipt> {
  const { pub, wallet } = clientsFor(n, from);
  const hash = await wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, ...call, gas: 3_000_000n } as never);
  return pub.waitForTransactionReceipt({ hash });
}

/** The simulated revert of a call, by error name, or 'no revert'. */
async function revertOf(n: NetworkEntry, from: Address, call: { functionName: string; args: readonly unknown[] }): Promise<string> {
  try {
    await clientsFor(n, fresh()).pub.simulateContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, account: from, ...(call as object) } as never);
    return 'no revert';
  } catch (error) {
    const cause = (error as { cause?: { data?: { errorName?: string; args?: readonly unknown[] }; reason?: string } }).cause;
    // A token's require() message bubbles up through the collector as Error(string).
    if (cause?.data?.errorName === 'Error') return String(cause.data.args?.[0]);
    return cause?.data?.errorName ?? cause?.reason ?? String(error).slice(0, 200);
  }
}

interface Merchant {
  receiver: Address;
  authorizer: PrivateKeyAccount;
}

function offerOn(n: NetworkEntry, merchant: Merchant, method: 'eip3009' | 'permit2'): BatchSettlementRequirements {
  const r = batchSettlementRequirements({
    network: `eip155:${n.chainId}`,
    asset: n.stablecoin.address,
    payTo: merchant.receiver,
    price: PRICE,
    maxTimeoutSeconds: 300,
    receiverAuthorizer: merchant.authorizer.address,
    withdrawDelay: 900,
    tokenName: n.stablecoin.name,
    tokenVersion: n.stablecoin.version,
    assetTransferMethod: method,
    minDeposit: DEPOSIT,
  });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

/** The official client of `payer` for one channel salt, reading the chain for channels it does not remember. */
function officialClient(n: NetworkEntry, payer: PrivateKeyAccount, salt: Hex): OfficialClient {
  const { pub } = clientsFor(n, payer);
  const signer = {
    address: payer.address,
    signTypedData: (message: Parameters<PrivateKeyAccount['signTypedData']>[0]) => payer.signTypedData(message),
    readContract: (args: Parameters<typeof pub.readContract>[0]) => pub.readContract(args),
  };
  return new OfficialClient(signer as never, { salt });
}

/** What the official client sends for `offer`, parsed by gate402's codec. */
async function officialPayment(client: OfficialClient, offer: BatchSettlementRequirements): Promise<{ wire: Record<string, unknown>; parsed: BatchPayload }> {
  const made = await client.createPaymentPayload(2, offer as never);
  const parsed = parseBatchPayload(made.payload);
  if (!parsed.ok) throw new Error(`${parsed.error.code}: ${parsed.error.message}`);
  return { wire: made.payload as Record<string, unknown>, parsed: parsed.value };
}

/** The official facilitator's verify, reading the devnet; it is never asked to send. */
function officialFacilitator(n: NetworkEntry): OfficialFacilitator {
  const { pub } = clientsFor(n, fresh());
  const refuse = () => Promise.reject(new Error('this facilitator only verifies'));
  const signer = {
    getAddresses: () => [fresh().address],
    readContract: (args: never) => pub.readContract(args),
    verifyTypedData: (args: never) => pub.verifyTypedData(args),
    getCode: (args: { address: Address }) => pub.getCode(args),
    writeContract: refuse,
    sendTransaction: refuse,
    waitForTransactionReceipt: refuse,
  };
  return new OfficialFacilitator(signer as never);
}

async function officialVerify(n: NetworkEntry, offer: BatchSettlementRequirements, wire: Record<string, unknown>) {
  return officialFacilitator(n).verify({ x402Version: 2, accepted: offer, payload: wire } as never, offer as never);
}

/** A payer with `amount` of stablecoin and gas (and, on a Permit2 chain, its one approval of Permit2). */
async function fundedPayer(n: NetworkEntry, amount: bigint, approvePermit2 = false): Promise<PrivateKeyAccount> {
  const payer = fresh();
  await giveGas(n, payer.address);
  await mint(n, payer.address, amount);
  if (approvePermit2) {
    const { pub, wallet } = clientsFor(n, payer);
    await pub.waitForTransactionReceipt({
      hash: await wallet.writeContract({ address: n.stablecoin.address, abi: stablecoinArtifact.abi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] }),
    });
  }
  return payer;
}

/** Opens a channel with the official client's deposit payload, submitted by `relayer`. */
async function openChannel(n: NetworkEntry, payer: PrivateKeyAccount, offer: BatchSettlementRequirements, relayer: PrivateKeyAccount, salt = randomSalt()) {
  const { parsed, wire } = await officialPayment(officialClient(n, payer, salt), offer);
  if (parsed.type !== 'deposit') throw new Error(`expected a deposit, got ${parsed.type}`);
  const receipt = await send(n, relayer, { functionName: 'deposit', args: depositCallArgs(parsed) });
  if (receipt.status !== 'success') throw new Error('deposit reverted');
  return { config: parsed.config, channelId: parsed.voucher.channelId, payload: parsed, wire, receipt, salt };
}

const signVoucher = (payer: PrivateKeyAccount, chainId: number, channelId: Hex, maxClaimableAmount: bigint) => payer.signTypedData(voucherTypedData({ channelId, maxClaimableAmount }, chainId));

async function claimWithSignature(n: NetworkEntry, merchant: Merchant, relayer: PrivateKeyAccount, rows: VoucherClaim[]) {
  const signature = await merchant.authorizer.signTypedData(claimBatchTypedData(rows, n.chainId));
  return send(n, relayer, { functionName: 'claimWithSignature', args: [voucherClaimArgs(rows), signature] });
}

const newMerchant = (): Merchant => ({ receiver: fresh().address, authorizer: fresh() });

t.test('the contracts stand at their canonical addresses on every devnet chain', async (t) => {
  for (const [caip2, n] of Object.entries(manifest.networks)) {
    const { pub } = clientsFor(n, fresh());
    t.equal(await pub.getCode({ address: BATCH_SETTLEMENT_ADDRESS }), x402BatchSettlementArtifact.deployedBytecode, `${caip2}: settlement`);
    t.equal(await pub.getCode({ address: ERC3009_DEPOSIT_COLLECTOR_ADDRESS }), erc3009DepositCollectorArtifact.deployedBytecode, `${caip2}: ERC-3009 collector`);
    t.equal(await pub.getCode({ address: PERMIT2_DEPOSIT_COLLECTOR_ADDRESS }), permit2DepositCollectorArtifact.deployedBytecode, `${caip2}: Permit2 collector`);
    const config: ChannelConfig = {
      payer: fresh().address,
      payerAuthorizer: fresh().address,
      receiver: fresh().address,
      receiverAuthorizer: fresh().address,
      token: n.stablecoin.address,
      withdrawDelay: 3600,
      salt: randomSalt(),
    };
    const onchain = await pub.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'getChannelId', args: [config] });
    t.equal(onchain.toLowerCase(), channelIdOf(config, n.chainId), `${caip2}: getChannelId is channelIdOf`);
    const digest = await pub.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'getVoucherDigest', args: [onchain, 5n] });
    const signer = fresh();
    const { recoverAddress } = await import('viem');
    t.equal(await recoverAddress({ hash: digest, signature: await signVoucher(signer, n.chainId, onchain, 5n) }), signer.address, `${caip2}: the voucher digest is the typed data's`);
  }
});

t.test('an EIP-3009 deposit made by the official client opens a channel on 8453', async (t) => {
  const merchant = newMerchant();
  const offer = offerOn(base, merchant, 'eip3009');
  // Enough for the first deposit and the client's top-up (five times the request it cannot cover).
  const payer = await fundedPayer(base, 7n * DEPOSIT);
  const relayer = fresh();
  await giveGas(base, relayer.address);
  const salt = randomSalt();
  const { parsed, wire } = await officialPayment(officialClient(base, payer, salt), offer);
  t.equal(parsed.type, 'deposit');
  if (parsed.type !== 'deposit') return;
  t.equal(parsed.deposit.authorization.kind, 'erc3009');
  t.equal(parsed.deposit.amount, DEPOSIT, 'the offer’s minDeposit');
  t.equal(parsed.voucher.maxClaimableAmount, PRICE, 'the first voucher is the price');
  t.ok(checkChannelBinding(parsed.config, parsed.voucher.channelId, offer).ok, 'binds to the offer');
  t.ok(checkDepositAuthorizationTerms(parsed as DepositPayload, offer, BigInt(Math.floor(Date.now() / 1000))).ok, 'authorization terms hold');
  t.equal(await classifyVoucherSignature(parsed.config, parsed.voucher, base.chainId), 'valid');
  t.same(
    await officialVerify(base, offer, wire),
    { isValid: true, payer: payer.address, extra: { channelId: parsed.voucher.channelId, balance: '0', totalClaimed: '0', withdrawRequestedAt: 0, refundNonce: '0' } },
    'the official facilitator agrees',
  );

  const before = { payer: await tokenBalance(base, payer.address), escrow: await tokenBalance(base, BATCH_SETTLEMENT_ADDRESS) };
  const receipt = await send(base, relayer, { functionName: 'deposit', args: depositCallArgs(parsed) });
  t.equal(receipt.status, 'success');
  t.comment(`${await gasLine(base, 'first deposit, ERC-3009', receipt)}; published ~${PUBLISHED.firstDeposit}`);
  t.same(await channelOf(base, parsed.voucher.channelId), { balance: DEPOSIT, totalClaimed: 0n });
  t.equal(before.payer - (await tokenBalance(base, payer.address)), DEPOSIT, 'the payer paid the deposit');
  t.equal((await tokenBalance(base, BATCH_SETTLEMENT_ADDRESS)) - before.escrow, DEPOSIT, 'the settlement contract holds it');
  t.equal(await tokenBalance(base, ERC3009_DEPOSIT_COLLECTOR_ADDRESS), 0n, 'the collector keeps nothing');
  t.equal(
    await revertOf(base, relayer.address, { functionName: 'deposit', args: depositCallArgs(parsed) }),
    'EIP3009: authorization is used or canceled',
    'the same authorization cannot deposit twice',
  );
  const otherChannel = { ...parsed.config, salt: randomSalt() };
  const stolen = depositCallArgs({ ...parsed, config: otherChannel });
  t.not(await revertOf(base, relayer.address, { functionName: 'deposit', args: stolen }), 'no revert', 'nor fund another channel of the payer');
  const direct = await revertOf(base, relayer.address, { functionName: 'deposit', args: [parsed.config, DEPOSIT, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, '0x'] });
  t.not(direct, 'no revert', 'a deposit without an authorization fails');

  // A top-up later in the channel's life: the same channel, a second authorization.
  const topUp = parseBatchPayload((await officialClient(base, payer, salt).createPaymentPayload(2, { ...offer, amount: (DEPOSIT + 1n).toString() } as never)).payload);
  t.ok(topUp.ok && topUp.value.type === 'deposit', 'a voucher beyond the balance makes the client top up');
  if (topUp.ok && topUp.value.type === 'deposit') {
    const again = await send(base, relayer, { functionName: 'deposit', args: depositCallArgs(topUp.value) });
    t.equal(again.status, 'success');
    t.equal((await channelOf(base, parsed.voucher.channelId)).balance, DEPOSIT + topUp.value.deposit.amount, 'the balance adds up');
  }
});

t.test('a Permit2 deposit made by the official client opens a channel on 4663', async (t) => {
  const merchant = newMerchant();
  const offer = offerOn(stock, merchant, 'permit2');
  const payer = await fundedPayer(stock, 2n * DEPOSIT, true);
  const relayer = fresh();
  await giveGas(stock, relayer.address);
  const { parsed, wire } = await officialPayment(officialClient(stock, payer, randomSalt()), offer);
  t.equal(parsed.type === 'deposit' && parsed.deposit.authorization.kind, 'permit2');
  if (parsed.type !== 'deposit') return;
  t.ok(checkDepositAuthorizationTerms(parsed, offer, BigInt(Math.floor(Date.now() / 1000))).ok, 'authorization terms hold');
  const verdict = await officialVerify(stock, offer, wire);
  t.equal(verdict.isValid, true, `the official facilitator agrees (${verdict.invalidReason ?? 'valid'})`);
  const receipt = await send(stock, relayer, { functionName: 'deposit', args: depositCallArgs(parsed) });
  t.equal(receipt.status, 'success');
  t.comment(`${await gasLine(stock, 'first deposit, Permit2', receipt)}; published ~${PUBLISHED.firstDeposit}`);
  t.same(await channelOf(stock, parsed.voucher.channelId), { balance: DEPOSIT, totalClaimed: 0n });
  t.equal(await tokenBalance(stock, payer.address), DEPOSIT, 'the payer paid the deposit');
  t.equal(await tokenBalance(stock, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS), 0n, 'the collector keeps nothing');
  t.not(await revertOf(stock, relayer.address, { functionName: 'deposit', args: depositCallArgs(parsed) }), 'no revert', 'the permit cannot be spent twice');
});

t.test("vouchers of the official client verify alike with gate402's codec and the official facilitator", async (t) => {
  const merchant = newMerchant();
  const offer = offerOn(base, merchant, 'eip3009');
  const payer = await fundedPayer(base, DEPOSIT);
  const relayer = fresh();
  await giveGas(base, relayer.address);
  const { salt, channelId } = await openChannel(base, payer, offer, relayer);
  // A new client instance remembers nothing and reads the channel from the chain: it pays by voucher now.
  const { parsed, wire } = await officialPayment(officialClient(base, payer, salt), offer);
  t.equal(parsed.type, 'voucher');
  t.equal(parsed.voucher.maxClaimableAmount, PRICE, 'totalClaimed (0) plus the price');
  const onchain = { ...(await channelOf(base, channelId)), withdrawRequestedAt: 0, refundNonce: 0n };

  const ours = async (payload: BatchPayload): Promise<string> => {
    const binding = checkChannelBinding(payload.config, payload.voucher.channelId, offer);
    if (!binding.ok) return binding.error.code;
    if ((await classifyVoucherSignature(payload.config, payload.voucher, base.chainId)) !== 'valid') return BatchReason.voucherSignature;
    const against = checkVoucherAgainstChannel(payload.type === 'refund' ? 'refund' : 'voucher', payload.voucher.maxClaimableAmount, onchain, PRICE);
    return against.ok ? 'valid' : against.error.code;
  };
  const theirs = async (w: Record<string, unknown>): Promise<string> => {
    const v = await officialVerify(base, offer, w);
    return v.isValid ? 'valid' : (v.invalidReason ?? 'invalid');
  };
  const voucherWire = wire.voucher as { channelId: Hex; maxClaimableAmount: string; signature: Hex };
  const cases: [string, Record<string, unknown>][] = [
    ['valid', wire],
    ['amount raised over its signature', { ...wire, voucher: { ...voucherWire, maxClaimableAmount: (PRICE + 1n).toString() } }],
    ['signed beyond the balance', { ...wire, voucher: { ...voucherWire, maxClaimableAmount: (DEPOSIT + 1n).toString(), signature: await signVoucher(payer, base.chainId, channelId, DEPOSIT + 1n) } }],
    ['another receiver', { ...wire, channelConfig: { ...(wire.channelConfig as object), receiver: fresh().address } }],
    ['signed by a stranger', { ...wire, voucher: { ...voucherWire, signature: await signVoucher(fresh(), base.chainId, channelId, PRICE) } }],
  ];
  for (const [name, w] of cases) {
    const parsedCase = parseBatchPayload(w);
    const mine = parsedCase.ok ? await ours(parsedCase.value) : parsedCase.error.code;
    t.equal(mine, await theirs(w), `${name}: ${mine}`);
  }
});

t.test('one claim of three channels moves exactly the claimed amounts, and settle sweeps them to the receiver', async (t) => {
  const merchant = newMerchant();
  const offer = offerOn(base, merchant, 'eip3009');
  const relayer = fresh();
  await giveGas(base, relayer.address);
  const payers = [await fundedPayer(base, DEPOSIT), await fundedPayer(base, DEPOSIT), await fundedPayer(base, DEPOSIT)];
  const channels = [];
  for (const payer of payers) channels.push({ payer, ...(await openChannel(base, payer, offer, relayer)) });
  const ceilings = [3000n, 5000n, 7000n];
  const claimed = [2500n, 5000n, 7000n];
  const rows: VoucherClaim[] = [];
  for (const [i, c] of channels.entries()) {
    const ceiling = ceilings[i]!;
    rows.push({ config: c.config, maxClaimableAmount: ceiling, signature: await signVoucher(c.payer, base.chainId, c.channelId, ceiling), totalClaimed: claimed[i]! });
  }
  t.equal(await revertOf(base, relayer.address, { functionName: 'claim', args: [voucherClaimArgs(rows)] }), 'NotReceiverSide', 'a stranger cannot claim directly');
  const forged = await fresh().signTypedData(claimBatchTypedData(rows, base.chainId));
  t.equal(
    await revertOf(base, relayer.address, { functionName: 'claimWithSignature', args: [voucherClaimArgs(rows), forged] }),
    'InvalidAuthorizerSignature',
    'nor with a signature not the authorizer’s',
  );
  const over = rows.map((r, i) => (i === 0 ? { ...r, totalClaimed: r.maxClaimableAmount + 1n } : r));
  const overSig = await merchant.authorizer.signTypedData(claimBatchTypedData(over, base.chainId));
  t.equal(await revertOf(base, relayer.address, { functionName: 'claimWithSignature', args: [voucherClaimArgs(over), overSig] }), 'ClaimAboveVoucher', 'a row above its voucher fails the batch');

  const escrowBefore = await tokenBalance(base, BATCH_SETTLEMENT_ADDRESS);
  const receipt = await claimWithSignature(base, merchant, relayer, rows);
  t.equal(receipt.status, 'success');
  t.comment(await gasLine(base, "claim of 3 channels, the merchant's first", receipt, 3n));
  for (const [i, c] of channels.entries()) t.same(await channelOf(base, c.channelId), { balance: DEPOSIT, totalClaimed: claimed[i]! }, `channel ${i}: totalClaimed is the claimed amount`);
  const [totalClaimed, totalSettled] = await clientsFor(base, relayer).pub.readContract({
    address: BATCH_SETTLEMENT_ADDRESS,
    abi: batchSettlementAbi,
    functionName: 'receivers',
    args: [merchant.receiver, base.stablecoin.address],
  });
  t.equal(totalClaimed, 14_500n, "the receiver's claimed total");
  t.equal(totalSettled, 0n);
  t.equal(await tokenBalance(base, BATCH_SETTLEMENT_ADDRESS), escrowBefore, 'a claim moves no tokens');
  t.equal(await tokenBalance(base, merchant.receiver), 0n);

  const retry = await claimWithSignature(base, merchant, relayer, rows);
  t.equal(retry.status, 'success', 'the same claim again is a no-op, not a revert');
  t.same(await channelOf(base, channels[0]!.channelId), { balance: DEPOSIT, totalClaimed: 2500n }, 'and claims nothing twice');

  const settle = await send(base, relayer, { functionName: 'settle', args: [merchant.receiver, base.stablecoin.address] });
  t.equal(settle.status, 'success');
  t.comment(await gasLine(base, "settle, the receiver's first", settle));
  t.equal(await tokenBalance(base, merchant.receiver), 14_500n, 'the receiver got exactly what was claimed');
  t.equal(escrowBefore - (await tokenBalance(base, BATCH_SETTLEMENT_ADDRESS)), 14_500n, 'out of the escrow');
  const again = await send(base, relayer, { functionName: 'settle', args: [merchant.receiver, base.stablecoin.address] });
  t.equal(again.status, 'success', 'settling again is a no-op');
  t.equal(await tokenBalance(base, merchant.receiver), 14_500n, 'and pays nothing twice');
});

t.test('gas: claims of 1 and 10 channels and a settle, for a merchant already paid before', async (t) => {
  const merchant = newMerchant();
  const offer = offerOn(base, merchant, 'eip3009');
  const relayer = fresh();
  await giveGas(base, relayer.address);
  const opened: (Awaited<ReturnType<typeof openChannel>> & { payer: PrivateKeyAccount })[] = [];
  for (let i = 0; i < 12; i++) {
    const payer = await fundedPayer(base, DEPOSIT);
    opened.push({ payer, ...(await openChannel(base, payer, offer, relayer)) });
  }
  // Each row is the voucher the official client signed with its deposit.
  const row = (c: (typeof opened)[number]): VoucherClaim => {
    const v = c.payload.voucher;
    return { config: c.config, maxClaimableAmount: v.maxClaimableAmount, signature: v.signature, totalClaimed: v.maxClaimableAmount };
  };
  // The merchant's first claim and first sweep create its totals and its token balance (one-time storage costs).
  const firstClaim = await claimWithSignature(base, merchant, relayer, [row(opened[0]!)]);
  const firstSettle = await send(base, relayer, { functionName: 'settle', args: [merchant.receiver, base.stablecoin.address] });
  t.equal(firstClaim.status, 'success', "the official client's voucher is claimed");
  t.equal((await channelOf(base, opened[0]!.channelId)).totalClaimed, PRICE);
  const one = await claimWithSignature(base, merchant, relayer, [row(opened[1]!)]);
  const ten = await claimWithSignature(base, merchant, relayer, opened.slice(2).map(row));
  t.equal(one.status, 'success');
  t.equal(ten.status, 'success');
  for (const c of opened.slice(1)) t.equal((await channelOf(base, c.channelId)).totalClaimed, PRICE);
  const settle = await send(base, relayer, { functionName: 'settle', args: [merchant.receiver, base.stablecoin.address] });
  t.equal(settle.status, 'success');
  t.equal(await tokenBalance(base, merchant.receiver), 12n * PRICE, 'every claimed voucher reached the receiver');
  t.comment(`${await gasLine(base, "the merchant's first claim (1 channel)", firstClaim)}; ${await gasLine(base, 'first settle', firstSettle)} (one-time storage)`);
  t.comment(`${await gasLine(base, 'claim of 1 channel', one)}; published ~${PUBLISHED.claim1}`);
  t.comment(`${await gasLine(base, 'claim of 10 channels', ten, 10n)}; published ~${PUBLISHED.claimPer10} per channel`);
  t.comment(`${await gasLine(base, 'settle', settle)}; published ~${PUBLISHED.settle}`);
  t.ok(ten.gasUsed / 10n < one.gasUsed, 'a channel costs less in a batch than alone');
});

t.test('refunds honour the refund nonce', async (t) => {
  const merchant = newMerchant();
  const offer = offerOn(base, merchant, 'eip3009');
  const relayer = fresh();
  await giveGas(base, relayer.address);
  const payer = await fundedPayer(base, DEPOSIT);
  const { config, channelId } = await openChannel(base, payer, offer, relayer);
  const rows: VoucherClaim[] = [{ config, maxClaimableAmount: 4000n, signature: await signVoucher(payer, base.chainId, channelId, 4000n), totalClaimed: 4000n }];
  await claimWithSignature(base, merchant, relayer, rows);
  const refund = async (nonce: bigint, amount: bigint) => [config, amount, nonce, await merchant.authorizer.signTypedData(refundTypedData({ channelId, nonce, amount }, base.chainId))] as const;

  const partial = await send(base, relayer, { functionName: 'refundWithSignature', args: await refund(0n, 100_000n) });
  t.equal(partial.status, 'success');
  t.equal(await tokenBalance(base, payer.address), 100_000n, 'the payer got the partial refund');
  t.same(await channelOf(base, channelId), { balance: DEPOSIT - 100_000n, totalClaimed: 4000n });
  t.equal(await revertOf(base, relayer.address, { functionName: 'refundWithSignature', args: await refund(0n, 100_000n) }), 'InvalidRefundNonce', 'a signed refund cannot be replayed');
  const stranger = [config, 1n, 1n, await fresh().signTypedData(refundTypedData({ channelId, nonce: 1n, amount: 1n }, base.chainId))] as const;
  t.equal(await revertOf(base, relayer.address, { functionName: 'refundWithSignature', args: stranger }), 'InvalidAuthorizerSignature', 'only the receiver authorizer signs refunds');

  const rest = await send(base, relayer, { functionName: 'refundWithSignature', args: await refund(1n, DEPOSIT) });
  t.equal(rest.status, 'success', 'a refund above the unclaimed escrow is capped');
  t.equal(await tokenBalance(base, payer.address), DEPOSIT - 4000n, 'the payer has everything not claimed');
  t.same(await channelOf(base, channelId), { balance: 4000n, totalClaimed: 4000n }, 'the claimed part stays for the receiver');
  const empty = await send(base, relayer, { functionName: 'refundWithSignature', args: await refund(2n, 1n) });
  t.equal(empty.status, 'success', 'a refund with nothing left moves nothing');
  t.equal(
    await clientsFor(base, relayer).pub.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'refundNonce', args: [channelId] }),
    3n,
    'but still advances the nonce',
  );
  await send(base, relayer, { functionName: 'settle', args: [merchant.receiver, base.stablecoin.address] });
  t.equal(await tokenBalance(base, merchant.receiver), 4000n, 'the receiver is paid what it claimed');
});

t.test('a timed withdrawal finalizes only after withdrawDelay, after the receiver claimed, and returns the rest to the payer', async (t) => {
  // A chain of its own: the test moves its clock, which would break every other file on the shared devnet.
  const anvil = await startAnvil({ chainId: 8453, port: 0, mnemonic: DEVNET_TEST_MNEMONIC, fundedAccounts: 40 });
  t.teardown(() => anvil.stop());
  const own = await deployDevnet({ [CAIP2.base]: { chainId: anvil.chainId, rpcUrl: anvil.rpcUrl } }, process.pid);
  const n = own.networks[CAIP2.base]!;
  const merchant = newMerchant();
  const offer = offerOn(n, merchant, 'eip3009');
  const relayer = fresh();
  await giveGas(n, relayer.address);
  const payer = await fundedPayer(n, DEPOSIT);
  const { config, channelId } = await openChannel(n, payer, offer, relayer);
  const pendingOf = async () => clientsFor(n, relayer).pub.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'pendingWithdrawals', args: [channelId] });

  t.equal(await revertOf(n, relayer.address, { functionName: 'initiateWithdraw', args: [config, DEPOSIT] }), 'NotPayerSide', 'only the payer side withdraws');
  t.equal(await revertOf(n, payer.address, { functionName: 'initiateWithdraw', args: [config, DEPOSIT + 1n] }), 'WithdrawAboveUnclaimed');
  const initiated = await send(n, payer, { functionName: 'initiateWithdraw', args: [config, DEPOSIT] });
  t.equal(initiated.status, 'success');
  const [amount, initiatedAt] = await pendingOf();
  t.equal(amount, DEPOSIT);
  t.ok(initiatedAt > 0, 'the withdraw is pending');
  t.equal(await revertOf(n, payer.address, { functionName: 'finalizeWithdraw', args: [config] }), 'WithdrawDelayNotElapsed', 'not before the delay');

  // During the delay the receiver claims the vouchers it accepted.
  const rows: VoucherClaim[] = [{ config, maxClaimableAmount: 6000n, signature: await signVoucher(payer, n.chainId, channelId, 6000n), totalClaimed: 6000n }];
  t.equal((await claimWithSignature(n, merchant, relayer, rows)).status, 'success', 'a claim while the withdraw is pending');

  await rpcCall(n.rpcUrl, 'evm_increaseTime', [config.withdrawDelay - 60]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  t.equal(await revertOf(n, payer.address, { functionName: 'finalizeWithdraw', args: [config] }), 'WithdrawDelayNotElapsed', 'a minute before the delay ends');
  await rpcCall(n.rpcUrl, 'evm_increaseTime', [61]);
  await rpcCall(n.rpcUrl, 'evm_mine', []);
  const finalized = await send(n, payer, { functionName: 'finalizeWithdraw', args: [config] });
  t.equal(finalized.status, 'success', 'after the delay');
  t.equal(await tokenBalance(n, payer.address), DEPOSIT - 6000n, 'the payer gets back everything unclaimed');
  t.same(await channelOf(n, channelId), { balance: 6000n, totalClaimed: 6000n });
  t.same(await pendingOf(), [0n, 0], 'no withdraw pending any more');
  t.equal(
    await revertOf(n, relayer.address, {
      functionName: 'claimWithSignature',
      args: [
        voucherClaimArgs([{ ...rows[0]!, maxClaimableAmount: 7000n, totalClaimed: 7000n, signature: await signVoucher(payer, n.chainId, channelId, 7000n) }]),
        await merchant.authorizer.signTypedData(claimBatchTypedData([{ ...rows[0]!, maxClaimableAmount: 7000n, totalClaimed: 7000n }], n.chainId)),
      ],
    }),
    'ClaimAboveBalance',
    'a voucher left unclaimed is lost to the receiver',
  );
  await send(n, relayer, { functionName: 'settle', args: [merchant.receiver, n.stablecoin.address] });
  t.equal(await tokenBalance(n, merchant.receiver), 6000n, 'the receiver keeps what it claimed in time');
});
