// The batch-settlement codecs against the official @x402/evm code and the compiled contracts: no chain needed.
import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { computeChannelId } from '@x402/evm/batch-settlement/client';
import { type Abi, type AbiFunction, type AbiEvent, type Address, type Hex, keccak256, toBytes } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS } from '../src/chain/canonical.ts';
import { x402BatchSettlementArtifact } from '../src/devnet/contracts/artifacts/index.ts';
import { batchSettlementAbi } from '../src/schemes/batch-settlement/abi.ts';
import { checkChannelBinding, checkDepositAuthorizationTerms } from '../src/schemes/batch-settlement/binding.ts';
import { channelIdOf, type ChannelConfig } from '../src/schemes/batch-settlement/channel-config.ts';
import type { VoucherClaim } from '../src/schemes/batch-settlement/claim-batch.ts';
import { claimRowFor, planClaim, type ClaimableChannel } from '../src/schemes/batch-settlement/claim-plan.ts';
import { claimRaise } from '../src/schemes/batch-settlement/receiver-operations.ts';
import { classifyVoucherStep, checkVoucherAgainstChannel } from '../src/schemes/batch-settlement/cumulative.ts';
import { parseBatchPayload, type DepositPayload } from '../src/schemes/batch-settlement/payload.ts';
import { BatchReason } from '../src/verify/batch-settlement-reasons.ts';
import { batchSettlementRequirements, correctiveRequirements, type BatchSettlementRequirements } from '../src/schemes/batch-settlement/requirements.ts';
import { classifyVoucherSignature, voucherTypedData } from '../src/schemes/batch-settlement/voucher.ts';

const require = createRequire(import.meta.url);
const x402EvmDist = join(dirname(require.resolve('@x402/evm')), '..', 'esm');

/** The official ABI constants: @x402/evm ships them in a bundle chunk that its package exports do not name. */
async function officialAbi(): Promise<Abi> {
  for (const file of (await readdir(x402EvmDist)).filter((f) => f.endsWith('.mjs'))) {
    const text = await readFile(join(x402EvmDist, file), 'utf8');
    if (text.includes('var batchSettlementABI =')) return ((await import(pathToFileURL(join(x402EvmDist, file)).href)) as { batchSettlementABI: Abi }).batchSettlementABI;
  }
  throw new Error('batchSettlementABI not found in @x402/evm');
}

const signatureOf = (item: AbiFunction | AbiEvent): string => {
  const types = (params: readonly { type: string; components?: readonly unknown[] }[]): string =>
    params.map((p) => (p.type.startsWith('tuple') ? `(${types(p.components as never)})${p.type.slice(5)}` : p.type)).join(',');
  const outputs = item.type === 'function' ? `:${types(item.outputs)}:${item.stateMutability === 'view' || item.stateMutability === 'pure' ? 'view' : 'write'}` : '';
  return `${item.type} ${item.name}(${types(item.inputs)})${outputs}`;
};
const signatures = (abi: Abi): Set<string> => new Set(abi.filter((i) => i.type === 'function' || i.type === 'event' || i.type === 'error').map((i) => signatureOf(i as AbiFunction)));

const config = (overrides: Partial<ChannelConfig> = {}): ChannelConfig => ({
  payer: privateKeyToAccount(generatePrivateKey()).address,
  payerAuthorizer: privateKeyToAccount(generatePrivateKey()).address,
  receiver: '0x1111111111111111111111111111111111111111',
  receiverAuthorizer: '0x2222222222222222222222222222222222222222',
  token: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  withdrawDelay: 900,
  salt: keccak256(toBytes('salt')),
  ...overrides,
});

t.test('canonical addresses are the official ones', async (t) => {
  const official = (await import('@x402/evm')) as unknown as Record<string, string>;
  t.equal(BATCH_SETTLEMENT_ADDRESS, official.BATCH_SETTLEMENT_ADDRESS);
  t.equal(ERC3009_DEPOSIT_COLLECTOR_ADDRESS, '0x4020806089470a89826cB9fB1f4059150b550004');
  t.equal(PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, '0x4020425FAf3B746C082C2f942b4E5159887B0005');
});

t.test('the compiled contract answers every call and event of the official ABI, and of gate402 abi.ts', async (t) => {
  const compiled = signatures(x402BatchSettlementArtifact.abi as Abi);
  const official = await officialAbi();
  t.ok(official.length >= 19, `the official ABI has ${official.length} entries`);
  for (const entry of signatures(official)) t.ok(compiled.has(entry), entry);
  for (const entry of signatures(batchSettlementAbi)) t.ok(compiled.has(entry), entry);
});

t.test('channelIdOf equals the official computeChannelId, bound to the chain', async (t) => {
  for (let i = 0; i < 5; i++) {
    const c = config({ withdrawDelay: 900 + i * 1000, salt: keccak256(toBytes(`s${i}`)) });
    t.equal(channelIdOf(c, 8453), computeChannelId(c, 'eip155:8453').toLowerCase());
    t.equal(channelIdOf(c, 4663), computeChannelId(c, 4663).toLowerCase());
  }
  const c = config();
  t.not(channelIdOf(c, 8453), channelIdOf(c, 84532), 'another chain, another channel');
  t.not(channelIdOf(c, 8453), channelIdOf({ ...c, salt: keccak256(toBytes('other')) }, 8453), 'another salt, another channel');
});

t.test('voucher signatures: the committed authorizer, the payer, or an RPC question', async (t) => {
  const payerKey = privateKeyToAccount(generatePrivateKey());
  const authorizerKey = privateKeyToAccount(generatePrivateKey());
  const c = config({ payer: payerKey.address, payerAuthorizer: authorizerKey.address });
  const channelId = channelIdOf(c, 8453);
  const v = { channelId, maxClaimableAmount: 5000n };
  const byAuthorizer = await authorizerKey.signTypedData(voucherTypedData(v, 8453));
  const byPayer = await payerKey.signTypedData(voucherTypedData(v, 8453));
  t.equal(await classifyVoucherSignature(c, { ...v, signature: byAuthorizer }, 8453), 'valid');
  t.equal(await classifyVoucherSignature(c, { ...v, signature: byPayer }, 8453), 'invalid', 'a committed authorizer excludes the payer key');
  t.equal(await classifyVoucherSignature(c, { ...v, maxClaimableAmount: 5001n, signature: byAuthorizer }, 8453), 'invalid', 'another amount');
  t.equal(await classifyVoucherSignature(c, { ...v, signature: byAuthorizer }, 84532), 'invalid', 'another chain');
  const open = { ...c, payerAuthorizer: '0x0000000000000000000000000000000000000000' as Address };
  t.equal(await classifyVoucherSignature(open, { ...v, signature: byPayer }, 8453), 'valid');
  t.equal(await classifyVoucherSignature(open, { ...v, signature: byAuthorizer }, 8453), 'needs_rpc', 'maybe an EIP-1271 wallet');
  t.equal(await classifyVoucherSignature(open, { ...v, signature: '0x1234' }, 8453), 'needs_rpc');
});

t.test('voucher steps: next, replayed, equal, lower, skipped', async (t) => {
  const record = { charged: 3000n, signedMaxClaimable: 3000n };
  t.equal(classifyVoucherStep(4000n, record, 1000n), 'next');
  t.equal(classifyVoucherStep(3000n, record, 1000n), 'replayed');
  t.equal(classifyVoucherStep(3000n, { charged: 3000n }, 1000n), 'equal');
  t.equal(classifyVoucherStep(3500n, record, 1000n), 'lower');
  t.equal(classifyVoucherStep(2000n, record, 1000n), 'lower');
  t.equal(classifyVoucherStep(5000n, record, 1000n), 'skipped');
  t.equal(classifyVoucherStep(1000n, { charged: 0n }, 1000n), 'next', 'the first voucher of a channel');
});

t.test('vouchers against the chain: not found, over balance, below claimed', async (t) => {
  const onchain = { balance: 10_000n, totalClaimed: 4000n, withdrawRequestedAt: 0, refundNonce: 0n };
  const code = (r: { ok: boolean; error?: { code: string } }) => (r.ok ? 'ok' : r.error?.code);
  t.equal(code(checkVoucherAgainstChannel('voucher', 5000n, onchain, 1000n)), 'ok');
  t.equal(code(checkVoucherAgainstChannel('voucher', 4500n, onchain, 1000n)), BatchReason.cumulativeBelowClaimed);
  t.equal(code(checkVoucherAgainstChannel('voucher', 10_001n, onchain, 1000n)), BatchReason.cumulativeExceedsBalance);
  t.equal(code(checkVoucherAgainstChannel('deposit', 10_001n, onchain, 1000n, 5000n)), 'ok', 'the deposit it carries counts');
  t.equal(code(checkVoucherAgainstChannel('voucher', 1000n, { ...onchain, balance: 0n, totalClaimed: 0n }, 1000n)), BatchReason.channelNotFound);
  t.equal(code(checkVoucherAgainstChannel('refund', 4000n, onchain, 1000n)), 'ok', "a refund's zero-charge voucher may equal the claimed total");
  t.equal(code(checkVoucherAgainstChannel('refund', 3999n, onchain, 1000n)), BatchReason.cumulativeBelowClaimed);
});

function offer(overrides: Partial<Parameters<typeof batchSettlementRequirements>[0]> = {}): BatchSettlementRequirements {
  const r = batchSettlementRequirements({
    network: 'eip155:8453',
    asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
    payTo: '0x1111111111111111111111111111111111111111',
    price: 1000n,
    maxTimeoutSeconds: 300,
    receiverAuthorizer: '0x2222222222222222222222222222222222222222',
    withdrawDelay: 900,
    tokenName: 'USD Coin',
    tokenVersion: '2',
    assetTransferMethod: 'eip3009',
    minDeposit: 100_000n,
    ...overrides,
  });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

t.test('requirements: the extra the spec asks for, refused when unsafe', async (t) => {
  const r = offer();
  t.same(r.extra, { receiverAuthorizer: '0x2222222222222222222222222222222222222222', withdrawDelay: 900, name: 'USD Coin', version: '2', minDeposit: '100000' });
  t.equal(r.amount, '1000');
  t.equal(offer({ assetTransferMethod: 'permit2' }).extra.assetTransferMethod, 'permit2');
  const refused = (o: Partial<Parameters<typeof batchSettlementRequirements>[0]>) => !batchSettlementRequirements({ ...offerTerms(), ...o }).ok;
  t.ok(refused({ withdrawDelay: 899 }), 'delay under 15 minutes');
  t.ok(refused({ withdrawDelay: 2_592_001 }), 'delay over 30 days');
  t.ok(refused({ receiverAuthorizer: '0x0000000000000000000000000000000000000000' }), 'zero authorizer');
  t.ok(refused({ minDeposit: 999n }), 'minDeposit under the price');
  t.ok(refused({ price: 0n }), 'free');
  const corrective = correctiveRequirements(
    r,
    { channelId: `0x${'ab'.repeat(32)}`, balance: '5', totalClaimed: '1', withdrawRequestedAt: 0, refundNonce: '0', chargedCumulativeAmount: '3' },
    { signedMaxClaimable: '3', signature: '0x01' },
  );
  t.equal(corrective.extra.voucherState?.signedMaxClaimable, '3');
  t.equal(r.extra.channelState, undefined, 'the base offer is left alone');
});

function offerTerms(): Parameters<typeof batchSettlementRequirements>[0] {
  return {
    network: 'eip155:8453',
    asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
    payTo: '0x1111111111111111111111111111111111111111',
    price: 1000n,
    maxTimeoutSeconds: 300,
    receiverAuthorizer: '0x2222222222222222222222222222222222222222',
    withdrawDelay: 900,
    tokenName: 'USD Coin',
    tokenVersion: '2',
    assetTransferMethod: 'eip3009',
  };
}

t.test('payload parsing: typed values, and the reason of the payload type when malformed', async (t) => {
  const r = offer();
  const c = config({ receiver: r.payTo, receiverAuthorizer: r.extra.receiverAuthorizer, token: r.asset });
  const channelId = channelIdOf(c, 8453);
  const voucher = { channelId, maxClaimableAmount: '1000', signature: `0x${'11'.repeat(65)}` };
  const deposit = {
    type: 'deposit',
    channelConfig: c,
    voucher,
    deposit: { amount: '100000', authorization: { erc3009Authorization: { validAfter: '0', validBefore: '2000000000', salt: `0x${'22'.repeat(32)}`, signature: `0x${'33'.repeat(65)}` } } },
  };
  const parsed = parseBatchPayload(deposit);
  t.ok(parsed.ok, 'a deposit parses');
  if (!parsed.ok || parsed.value.type !== 'deposit') return;
  t.equal(parsed.value.voucher.maxClaimableAmount, 1000n);
  t.equal(parsed.value.deposit.authorization.kind, 'erc3009');
  t.ok(checkChannelBinding(parsed.value.config, parsed.value.voucher.channelId, r).ok, 'binds to the offer');
  t.ok(checkDepositAuthorizationTerms(parsed.value as DepositPayload, r, 1_900_000_000n).ok, 'within its window');
  const reason = (value: unknown) => {
    const p = parseBatchPayload(value);
    return p.ok ? 'ok' : p.error.code;
  };
  t.equal(reason({ ...deposit, type: 'claim' }), BatchReason.payloadType);
  t.equal(reason(null), BatchReason.payloadType);
  t.equal(reason({ ...deposit, extra: 1 }), BatchReason.depositPayload, 'closed');
  t.equal(reason({ ...deposit, deposit: { amount: '0', authorization: deposit.deposit.authorization } }), BatchReason.depositPayload, 'zero deposit');
  t.equal(reason({ ...deposit, deposit: { amount: '1', authorization: {} } }), BatchReason.depositPayload, 'no authorization');
  t.equal(reason({ type: 'voucher', channelConfig: c, voucher: { ...voucher, channelId: '0x12' } }), BatchReason.channelIdInvalid);
  t.equal(reason({ type: 'voucher', channelConfig: c, voucher: { ...voucher, maxClaimableAmount: (1n << 128n).toString() } }), BatchReason.voucherPayload, 'above uint128');
  t.equal(reason({ type: 'voucher', channelConfig: { ...c, withdrawDelay: '900' }, voucher }), BatchReason.voucherPayload);
  t.equal(reason({ type: 'refund', channelConfig: c, voucher }), 'ok', 'a full refund');
  t.equal(reason({ type: 'refund', channelConfig: c, voucher, amount: '0' }), BatchReason.refundAmountInvalid);
  t.equal(reason({ type: 'refund', channelConfig: c, voucher, amount: '-5' }), BatchReason.refundAmountInvalid);

  const code = (x: { ok: boolean; error?: { code: string } }) => (x.ok ? 'ok' : x.error?.code);
  t.equal(code(checkChannelBinding({ ...c, receiver: '0x3333333333333333333333333333333333333333' }, channelId, r)), BatchReason.channelIdMismatch, 'the id binds the config first');
  const other = { ...c, receiver: '0x3333333333333333333333333333333333333333' as Address };
  t.equal(code(checkChannelBinding(other, channelIdOf(other, 8453), r)), BatchReason.receiverMismatch);
  const otherAuth = { ...c, receiverAuthorizer: '0x3333333333333333333333333333333333333333' as Address };
  t.equal(code(checkChannelBinding(otherAuth, channelIdOf(otherAuth, 8453), r)), BatchReason.receiverAuthorizerMismatch);
  const otherDelay = { ...c, withdrawDelay: 901 };
  t.equal(code(checkChannelBinding(otherDelay, channelIdOf(otherDelay, 8453), r)), BatchReason.withdrawDelayMismatch);
  t.equal(code(checkChannelBinding(c, channelIdOf(c, 84532), r)), BatchReason.channelIdMismatch, 'a channel of another chain');
  t.equal(code(checkDepositAuthorizationTerms(parsed.value as DepositPayload, r, 2_000_000_000n)), BatchReason.validBefore);
  t.equal(code(checkDepositAuthorizationTerms(parsed.value as DepositPayload, offer({ assetTransferMethod: 'permit2' }), 1_900_000_000n)), BatchReason.permit2AuthorizationRequired);
});

t.test('claim plans: exposure only, withdraw deadlines first, one authorizer, charges never above the voucher', async (t) => {
  const authorizerA = '0x2222222222222222222222222222222222222222' as Address;
  const authorizerB = '0x3333333333333333333333333333333333333333' as Address;
  const channel = (name: string, charged: bigint, totalClaimed: bigint, withdrawRequestedAt = 0, receiverAuthorizer = authorizerA): ClaimableChannel => ({
    config: config({ salt: keccak256(toBytes(name)), receiverAuthorizer }),
    charged,
    signedMaxClaimable: charged + 1000n,
    signature: '0x01',
    totalClaimed,
    withdrawRequestedAt,
  });
  const idle = channel('idle', 5000n, 5000n);
  const small = channel('small', 2000n, 0n);
  const large = channel('large', 9000n, 1000n);
  const leaving = channel('leaving', 1000n, 0n, 1_000_000);
  const leavingLater = channel('leaving-later', 1000n, 0n, 2_000_000);
  const otherAuthorizer = channel('other', 50_000n, 0n, 0, authorizerB);
  const plan = planClaim([idle, small, large, leavingLater, leaving, otherAuthorizer], 10);
  t.same(
    plan.rows.map((r) => r.config.salt),
    [leaving, leavingLater, large, small].map((c) => c.config.salt),
    'deadlines first, then exposure; nothing claimed twice; one authorizer',
  );
  t.equal(plan.nearestDeadline, 1_000_000 + 900);
  t.same(
    plan.rows.map((r) => r.totalClaimed),
    [1000n, 1000n, 9000n, 2000n],
    'a row claims what was charged',
  );
  t.equal(planClaim([small, large], 1).rows.length, 1, 'at most maxRows');
  const over = { ...small, signedMaxClaimable: 1999n };
  const refused = planClaim([over], 10);
  t.equal(refused.rows.length, 0);
  t.equal(refused.refused[0]?.reason, BatchReason.chargeExceedsSignedCumulative, 'charges above the signed ceiling are never claimed');
  const row = claimRowFor(large);
  t.same(row.ok && [row.value.totalClaimed, row.value.maxClaimableAmount], [9000n, 10_000n], 'the charges, under the signed ceiling');
});

t.test("a claim's worth: each channel's raise once, from its highest row; rows of another token count nothing", async (t) => {
  const usdc = config().token;
  const [a, b, other] = [config(), config({ salt: keccak256(toBytes('b')) }), config({ token: privateKeyToAccount(generatePrivateKey()).address })];
  const ids = [a, b, other].map((c) => channelIdOf(c, 8453));
  const [idA, idB, idOther] = ids as [Hex, Hex, Hex];
  const row = (c: ChannelConfig, total: bigint): VoucherClaim => ({ config: c, maxClaimableAmount: total, signature: '0x', totalClaimed: total });
  const claimed = new Map<Hex, bigint>([
    [idA, 100n],
    [idB, 0n],
    [idOther, 0n],
  ]);
  t.equal(claimRaise([row(a, 150n)], [idA], claimed, usdc), 50n, 'the raise above what the channel has claimed');
  t.equal(claimRaise([row(a, 101n), row(a, 102n), row(a, 103n)], [idA, idA, idA], claimed, usdc), 3n, 'one channel in three rows: its highest row, not their sum');
  t.equal(claimRaise([row(a, 90n), row(b, 7n)], [idA, idB], claimed, usdc), 7n, 'a row below the claimed total moves nothing');
  t.equal(claimRaise([row(other, 1_000_000n), row(b, 1n)], [idOther, idB], claimed, usdc), 1n, 'a row of another token counts nothing');
  t.equal(claimRaise([row(a, 150n)], [idA], claimed, usdc.toLowerCase() as Address), 50n, 'the token compared as an address, whatever its case');
});
