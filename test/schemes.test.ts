// The payment schemes' pure parts, and their chain reads against an in-memory chain: which scheme a payment is, the
// checks and their reason codes, the settlement call and its calldata, what a batch receipt proves, the nonce keys,
// and the revert diagnosis. Milliseconds; the devnet tests (devnet-eip3009, devnet-permit2, settlement-batching,
// front-run) run the same code against real chains.
import t from 'tap';
import { encodeAbiParameters, encodeFunctionData, pad, parseAbi, toEventSelector, toFunctionSelector, type Address, type Hex, type Log, type TransactionReceipt } from 'viem';
import type { StablecoinInfo } from '../src/chain/network-types.ts';
import type { Network } from '../src/chain/networks.ts';
import { aggregateCall, callsOfBatch, settledCalls } from '../src/engine/settlement-batch.ts';
import type { Eip3009Payload, PaymentRequirements, Permit2Payload, VerifyRequest } from '../src/protocol/x402/types.ts';
import { authorizationStateAbi, authorizationUsedEvent, transferWithAuthorizationAbi } from '../src/schemes/eip3009/abi.ts';
import { eip3009Scheme } from '../src/schemes/eip3009/scheme.ts';
import { nonceBitmapAbi, proxySettlementAbi, settleAbi } from '../src/schemes/permit2/abi.ts';
import { permit2Scheme } from '../src/schemes/permit2/scheme.ts';
import { decodeSettlementCall, SCHEMES, schemeForRequirements, schemeNamed, schemeOfPayload } from '../src/schemes/registry.ts';
import type { ChainReads, CheckInput, SettlementCall } from '../src/schemes/scheme.ts';

const TOKEN: Address = '0x1000000000000000000000000000000000000001';
const PROXY: Address = '0x402085c248EeA27D92E8b30b2C58ed07f9E20001';
const PERMIT2: Address = '0x000000000022D473030F116dDEE9F6B43aC78BA3';
const PAYER: Address = '0x2000000000000000000000000000000000000002';
const PAYEE: Address = '0x3000000000000000000000000000000000000003';
const NOW = 1_800_000_000n;
const SIGNATURE: Hex = `0x${'11'.repeat(65)}`;
const NONCE3009: Hex = `0x${'ab'.repeat(32)}`;

const token: StablecoinInfo = { address: TOKEN, name: 'USD Coin', version: '2', decimals: 6 } as StablecoinInfo;
const base: Network = { caip2: 'eip155:8453', chainId: 8453, rpcUrl: 'http://127.0.0.1:1', stablecoin: token };
const stock: Network = { ...base, caip2: 'eip155:4663', chainId: 4663, permit2: PERMIT2, exactPermit2Proxy: PROXY };

const eip3009Req: PaymentRequirements = { scheme: 'exact', network: 'eip155:8453', amount: '1000', asset: TOKEN, payTo: PAYEE, maxTimeoutSeconds: 60, extra: { name: 'USD Coin', version: '2' } };
const permit2Req: PaymentRequirements = { ...eip3009Req, network: 'eip155:4663', extra: { assetTransferMethod: 'permit2', spender: PROXY } };

const eip3009Payload = (a: Partial<Eip3009Payload['authorization']> = {}): Eip3009Payload => ({
  signature: SIGNATURE,
  authorization: { from: PAYER, to: PAYEE, value: '1000', validAfter: '0', validBefore: String(NOW + 60n), nonce: NONCE3009, ...a },
});
const permit2Payload = (p: Partial<Permit2Payload['permit2Authorization']> = {}): Permit2Payload => ({
  signature: SIGNATURE,
  permit2Authorization: { from: PAYER, permitted: { token: TOKEN, amount: '1000' }, spender: PROXY, nonce: '258', deadline: String(NOW + 60n), witness: { to: PAYEE, validAfter: '0' }, ...p },
});
const request = (req: PaymentRequirements, payload: Eip3009Payload | Permit2Payload): VerifyRequest => ({
  x402Version: 2,
  paymentPayload: { x402Version: 2, accepted: req, payload },
  paymentRequirements: req,
});
const input = (req: PaymentRequirements, payload: Eip3009Payload | Permit2Payload, network: Network, over: Partial<CheckInput> = {}): CheckInput => ({
  requirements: req,
  accepted: req,
  payload,
  network,
  token,
  now: NOW,
  ...over,
});
const reasonOf = (c: ReturnType<typeof eip3009Scheme.check>) => (c.ok ? 'ok' : c.error.code);

t.test('the registry picks the scheme of requirements and of payloads', async (t) => {
  t.equal(schemeForRequirements(eip3009Req), eip3009Scheme, 'a token domain and no transfer method: EIP-3009');
  t.equal(schemeForRequirements(permit2Req), permit2Scheme, 'assetTransferMethod permit2');
  t.equal(schemeForRequirements({ ...eip3009Req, extra: { ...eip3009Req.extra, assetTransferMethod: 'eip3009' } }), eip3009Scheme, 'assetTransferMethod eip3009');
  t.equal(schemeForRequirements({ ...eip3009Req, extra: { assetTransferMethod: 'something-else' } }), eip3009Scheme, 'an unknown method falls back to EIP-3009, as before');
  t.equal(schemeOfPayload(eip3009Payload()), eip3009Scheme);
  t.equal(schemeOfPayload(permit2Payload()), permit2Scheme);
  t.throws(() => schemeOfPayload({ signature: SIGNATURE } as unknown as Eip3009Payload), TypeError, 'a payload of no scheme is refused, not guessed');
  t.throws(() => schemeOfPayload({ ...eip3009Payload(), ...permit2Payload() } as unknown as Eip3009Payload), TypeError, 'nor is a payload of two shapes');
  t.same(
    SCHEMES.map((s) => s.name),
    ['deposit-eip3009', 'deposit-permit2', 'eip3009', 'permit2'],
    'the batch-settlement deposits first: their requirements name no exact transfer method either',
  );
  t.equal(schemeNamed('permit2'), permit2Scheme);
  t.equal(eip3009Scheme.payer(eip3009Payload()), PAYER);
  t.equal(permit2Scheme.payer(permit2Payload()), PAYER);
  t.throws(() => eip3009Scheme.payer(permit2Payload()), TypeError, "a scheme never reads another scheme's payload");
});

t.test("the requirements' extra each scheme asks a payer to sign by", async (t) => {
  t.same(eip3009Scheme.requirementsExtra(base), { name: 'USD Coin', version: '2' }, "EIP-3009: the token's EIP-712 domain");
  t.same(permit2Scheme.requirementsExtra(stock), { assetTransferMethod: 'permit2', spender: PROXY }, 'Permit2: the method and the proxy as spender');
  t.equal(permit2Scheme.requirementsExtra(base), undefined, 'no Permit2 offer where no proxy is configured');
  t.equal(schemeForRequirements({ ...permit2Req, extra: permit2Scheme.requirementsExtra(stock) ?? {} }), permit2Scheme, 'requirements built by a scheme ask for it');
  t.equal(schemeForRequirements({ ...eip3009Req, extra: eip3009Scheme.requirementsExtra(base) ?? {} }), eip3009Scheme);
});

t.test("the small ABIs are the contracts' own functions and events", async (t) => {
  // Published selectors: FiatToken v2.2 (transferWithAuthorization with a bytes signature, authorizationState,
  // AuthorizationUsed), the x402 exact-permit proxy (settle, settleWithPermit), Permit2 (nonceBitmap).
  t.equal(toFunctionSelector(transferWithAuthorizationAbi[0]), '0xcf092995');
  t.equal(toFunctionSelector(authorizationStateAbi[0]), '0xe94a0102');
  t.equal(toEventSelector(authorizationUsedEvent), '0x98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a5');
  t.equal(toFunctionSelector(settleAbi[0]), '0x13cd3b53');
  t.equal(toFunctionSelector(proxySettlementAbi[1]), '0xfa340378');
  t.equal(toFunctionSelector(nonceBitmapAbi[0]), '0x4fe02b44');
  const batch = aggregateCall(PROXY, [], true);
  t.equal(batch.data.slice(0, 10), '0x82ad56cb', "Multicall3's aggregate3");
});

t.test('EIP-3009: the pure checks, in the reference order, with its reason codes', async (t) => {
  const ok = eip3009Scheme.check(input(eip3009Req, eip3009Payload(), base));
  t.ok(ok.ok, 'a matching authorization passes');
  if (ok.ok) {
    t.same({ payer: ok.payer, payee: ok.payee, amount: ok.amount }, { payer: PAYER, payee: PAYEE, amount: 1000n });
    t.same(ok.job?.domain, { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: TOKEN }, "the signature is checked against the token's domain on its chain");
    t.equal(ok.call.to, TOKEN, 'settled by the token itself');
  }
  t.equal(reasonOf(eip3009Scheme.check(input(eip3009Req, permit2Payload(), base))), 'invalid_exact_evm_scheme', 'a Permit2 payload for EIP-3009 requirements');
  t.equal(reasonOf(eip3009Scheme.check(input({ ...eip3009Req, extra: {} }, eip3009Payload(), base))), 'invalid_exact_evm_missing_eip712_domain');
  t.equal(reasonOf(eip3009Scheme.check(input(eip3009Req, eip3009Payload(), base, { accepted: { ...eip3009Req, network: 'eip155:84532' } }))), 'invalid_exact_evm_network_mismatch');
  t.equal(reasonOf(eip3009Scheme.check(input(eip3009Req, eip3009Payload({ to: PAYER }), base))), 'invalid_exact_evm_recipient_mismatch');
  t.equal(
    reasonOf(eip3009Scheme.check(input(eip3009Req, eip3009Payload({ validBefore: String(NOW + 5n) }), base))),
    'invalid_exact_evm_payload_authorization_valid_before',
    'less than the 6-second buffer left',
  );
  t.equal(reasonOf(eip3009Scheme.check(input(eip3009Req, eip3009Payload({ validAfter: String(NOW + 1n) }), base))), 'invalid_exact_evm_payload_authorization_valid_after');
  t.equal(reasonOf(eip3009Scheme.check(input(eip3009Req, eip3009Payload({ value: '999' }), base))), 'invalid_exact_evm_payload_authorization_value_mismatch');
  t.equal(reasonOf(eip3009Scheme.check(input({ ...eip3009Req, extra: { name: 'USDC', version: '2' } }, eip3009Payload(), base))), 'invalid_exact_evm_token_name_mismatch');
  const refused = eip3009Scheme.check(input(eip3009Req, eip3009Payload({ to: PAYER }), base));
  t.equal(!refused.ok && refused.error.payer, PAYER, 'a refusal past the shape names the payer');
});

t.test('Permit2: the pure checks, in the reference order, with its reason codes', async (t) => {
  const ok = permit2Scheme.check(input(permit2Req, permit2Payload(), stock));
  t.ok(ok.ok, 'a matching witness permit passes');
  if (ok.ok) {
    t.same({ payer: ok.payer, payee: ok.payee, amount: ok.amount }, { payer: PAYER, payee: PAYEE, amount: 1000n });
    t.same(ok.job?.domain, { chainId: 4663, verifyingContract: PERMIT2 }, "the signature is checked against the chain's Permit2");
    t.equal(ok.call.to, PROXY, 'settled through the exact-permit proxy');
  }
  t.equal(reasonOf(permit2Scheme.check(input(permit2Req, eip3009Payload(), stock))), 'unsupported_payload_type', 'an EIP-3009 payload for Permit2 requirements');
  t.equal(reasonOf(permit2Scheme.check(input(permit2Req, permit2Payload(), base))), 'permit2_proxy_not_deployed', 'a chain without the proxy');
  t.equal(reasonOf(permit2Scheme.check(input(permit2Req, permit2Payload({ spender: PAYEE }), stock))), 'invalid_permit2_spender');
  t.equal(reasonOf(permit2Scheme.check(input(permit2Req, permit2Payload({ witness: { to: PAYER, validAfter: '0' } }), stock))), 'invalid_permit2_recipient_mismatch');
  t.equal(reasonOf(permit2Scheme.check(input(permit2Req, permit2Payload({ deadline: String(NOW) }), stock))), 'permit2_deadline_expired');
  t.equal(reasonOf(permit2Scheme.check(input(permit2Req, permit2Payload({ witness: { to: PAYEE, validAfter: String(NOW + 1n) } }), stock))), 'permit2_not_yet_valid');
  t.equal(reasonOf(permit2Scheme.check(input(permit2Req, permit2Payload({ permitted: { token: TOKEN, amount: '1001' } }), stock))), 'permit2_amount_mismatch');
  t.equal(reasonOf(permit2Scheme.check(input(permit2Req, permit2Payload({ permitted: { token: PAYEE, amount: '1000' } }), stock))), 'permit2_token_mismatch');
});

t.test('settlement calls read back from their calldata, as a batch holds them', async (t) => {
  const e = eip3009Scheme.settlementCall(eip3009Payload(), { network: base, token });
  const p = permit2Scheme.settlementCall(permit2Payload(), { network: stock, token });
  t.equal(permit2Scheme.settlementCall(permit2Payload(), { network: base, token }), undefined, 'no proxy, no Permit2 call');
  if (!e || !p) return t.fail('both calls are built');
  t.same(e.expect, { token: TOKEN, from: PAYER, to: PAYEE, value: 1000n });
  t.same(e.ownLog, { emitter: TOKEN, topics: [toEventSelector(authorizationUsedEvent), pad(PAYER, { size: 32 }), NONCE3009] }, "EIP-3009's own log: AuthorizationUsed(payer, nonce) from the token");
  t.same(p.expect, { token: TOKEN, from: PAYER, to: PAYEE, value: 1000n });
  t.equal(p.ownLog, undefined, 'Permit2 logs no nonce');
  t.same(decodeSettlementCall(e.to, e.data), e, 'EIP-3009 round trip');
  t.same(decodeSettlementCall(p.to, p.data), p, 'Permit2 round trip');
  t.equal(decodeSettlementCall(TOKEN, '0xdeadbeef'), undefined, 'another call is no settlement');
  const a = eip3009Payload().authorization;
  const viaViem = encodeFunctionData({
    abi: transferWithAuthorizationAbi,
    functionName: 'transferWithAuthorization',
    args: [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, eip3009Payload().signature],
  });
  t.equal(e.data, viaViem, "EIP-3009 calldata is byte for byte viem's encodeFunctionData");
  t.equal(decodeSettlementCall(e.to, e.data.slice(0, -64) as Hex), undefined, 'truncated calldata is no settlement');
  const batch = aggregateCall(PROXY, [e, p], true);
  const aggregate3 = parseAbi(['struct Call3 { address target; bool allowFailure; bytes callData; }', 'function aggregate3(Call3[] calls) payable returns ((bool success, bytes returnData)[])']);
  t.equal(
    batch.data,
    encodeFunctionData({ abi: aggregate3, functionName: 'aggregate3', args: [[e, p].map((c) => ({ target: c.to, allowFailure: true, callData: c.data }))] }),
    "aggregate3 calldata is byte for byte viem's",
  );
  t.same(callsOfBatch(batch.data), [e, p], 'a batch transaction gives back its calls');
  t.throws(() => callsOfBatch(e.data), 'a call that is not aggregate3 is no batch');
  t.same(eip3009Scheme.expectedTransfer(request(eip3009Req, eip3009Payload())), e.expect, "the Transfer a lone settlement must log is the call's");
  t.same(permit2Scheme.expectedTransfer(request(permit2Req, permit2Payload())), p.expect);
});

const transferLog = (from: Address, to: Address, value: bigint): Log =>
  ({
    address: TOKEN,
    topics: [toEventSelector('Transfer(address indexed,address indexed,uint256)'), pad(from, { size: 32 }), pad(to, { size: 32 })],
    data: encodeAbiParameters([{ type: 'uint256' }], [value]),
  }) as unknown as Log;
const receiptOf = (logs: Log[]): TransactionReceipt => ({ status: 'success', logs }) as unknown as TransactionReceipt;

t.test('a batch receipt proves a call settled by its own log, or by a Transfer no other call could have logged', async (t) => {
  const e1 = eip3009Scheme.settlementCall(eip3009Payload(), { network: base, token }) as SettlementCall;
  const e2 = eip3009Scheme.settlementCall(eip3009Payload({ nonce: `0x${'cd'.repeat(32)}` }), { network: base, token }) as SettlementCall;
  const used = (c: SettlementCall): Log => ({ address: c.ownLog?.emitter, topics: c.ownLog?.topics, data: '0x' }) as unknown as Log;
  const twoTransfers = [transferLog(PAYER, PAYEE, 1000n), transferLog(PAYER, PAYEE, 1000n)];
  t.same(settledCalls(receiptOf([...twoTransfers, used(e1), used(e2)]), [e1, e2]), [true, true], 'both authorizations used, both Transfers logged');
  t.same(settledCalls(receiptOf([...twoTransfers, used(e1)]), [e1, e2]), [true, false], 'a Transfer of the same amount does not settle the call whose authorization the token did not use');
  t.same(settledCalls(receiptOf([transferLog(PAYER, PAYEE, 1000n), used(e1), used(e2)]), [e1, e2]), [true, false], 'one Transfer settles one call only');
  t.same(settledCalls({ ...receiptOf([...twoTransfers, used(e1), used(e2)]), status: 'reverted' }, [e1, e2]), [false, false], 'a reverted batch settles nothing');

  const p1 = permit2Scheme.settlementCall(permit2Payload(), { network: stock, token }) as SettlementCall;
  const p2 = permit2Scheme.settlementCall(permit2Payload({ nonce: '259' }), { network: stock, token }) as SettlementCall;
  t.same(settledCalls(receiptOf([transferLog(PAYER, PAYEE, 1000n)]), [p1]), [true], 'a Permit2 call by its Transfer');
  t.same(settledCalls(receiptOf([transferLog(PAYER, PAYEE, 1000n)]), [p1, p2]), [false, false], 'two Permit2 calls that cannot be told apart prove nothing');
});

t.test('nonce keys: what the chain makes unique, whatever the case', async (t) => {
  const e = eip3009Scheme.nonceKey(request(eip3009Req, eip3009Payload()));
  t.equal(e, `eip3009|eip155:8453|${TOKEN}|${PAYER}|${NONCE3009}`.toLowerCase());
  t.equal(eip3009Scheme.nonceKey(request(eip3009Req, eip3009Payload({ from: PAYER.toUpperCase().replace('0X', '0x') as Address, nonce: NONCE3009.toUpperCase().replace('0X', '0x') as Hex }))), e);
  t.equal(permit2Scheme.nonceKey(request(permit2Req, permit2Payload())), `permit2|eip155:4663|${PAYER.toLowerCase()}|258`, 'Permit2 nonces are per owner across tokens');
});

/** An in-memory chain: the answers of the reads a diagnosis makes, recording what it was asked. */
function chainWith(answers: Record<string, unknown>, code: Record<string, boolean> = {}): ChainReads & { asked: string[] } {
  const asked: string[] = [];
  const client = {
    readContract: async ({ functionName, args }: { functionName: string; args: readonly unknown[] }) => {
      asked.push(`${functionName}(${args.map(String).join(',')})`);
      const a = answers[functionName];
      if (a instanceof Error) throw a;
      return a;
    },
  };
  return { asked, client: client as unknown as ChainReads['client'], hasCode: async (address) => code[address.toLowerCase()] ?? true };
}

t.test("revert diagnosis: what the chain shows, in each scheme's reason codes", async (t) => {
  const e = eip3009Scheme.settlementCall(eip3009Payload(), { network: base, token }) as SettlementCall;
  const diagnose3009 = (answers: Record<string, unknown>) => eip3009Scheme.diagnoseRevert(chainWith(answers), e, eip3009Payload());
  t.equal(await diagnose3009({ authorizationState: new Error('no such function'), balanceOf: 10_000n }), 'invalid_exact_evm_eip3009_not_supported');
  t.equal(await diagnose3009({ authorizationState: true, balanceOf: 10_000n }), 'invalid_exact_evm_nonce_already_used');
  t.equal(await diagnose3009({ authorizationState: false, balanceOf: 999n }), 'invalid_exact_evm_insufficient_balance');
  t.equal(await diagnose3009({ authorizationState: false, balanceOf: 1000n }), 'invalid_exact_evm_transaction_simulation_failed');
  const chain = chainWith({ authorizationState: false, balanceOf: 1000n });
  await eip3009Scheme.diagnoseRevert(chain, e, eip3009Payload());
  t.ok(chain.asked.includes(`authorizationState(${PAYER},${NONCE3009})`), "asks the token for the payer's nonce");

  const p = permit2Scheme.settlementCall(permit2Payload(), { network: stock, token }) as SettlementCall;
  const diagnosePermit2 = (answers: Record<string, unknown>, code: Record<string, boolean> = {}) => permit2Scheme.diagnoseRevert(chainWith(answers, code), p, permit2Payload());
  const fine = { balanceOf: 1000n, allowance: 1000n, nonceBitmap: 0n };
  t.equal(await diagnosePermit2(fine, { [PROXY.toLowerCase()]: false }), 'permit2_proxy_not_deployed');
  t.equal(await diagnosePermit2(fine, { [PERMIT2.toLowerCase()]: false }), 'permit2_proxy_not_deployed', 'no Permit2');
  t.equal(await diagnosePermit2({ ...fine, balanceOf: 999n }), 'permit2_insufficient_balance');
  t.equal(await diagnosePermit2({ ...fine, allowance: 999n }), 'permit2_allowance_required');
  t.equal(await diagnosePermit2({ ...fine, nonceBitmap: 1n << 2n }), 'permit2_invalid_nonce', 'nonce 258 is bit 2 of word 1');
  t.equal(await diagnosePermit2({ ...fine, nonceBitmap: 1n << 3n }), 'permit2_simulation_failed', 'another bit of the word is another nonce');
  const pchain = chainWith(fine);
  await permit2Scheme.diagnoseRevert(pchain, p, permit2Payload());
  t.ok(pchain.asked.includes(`nonceBitmap(${PAYER},1)`), 'reads the word of the nonce');
});

t.test('each scheme names its reasons where every scheme has one', async (t) => {
  t.same(
    SCHEMES.map((s) => [s.name, s.reasons.signature, s.reasons.amountMismatch, s.reasons.nonceUsed, s.assetCheckedFirst]),
    [
      [
        'deposit-eip3009',
        'invalid_batch_settlement_evm_receive_authorization_signature',
        'invalid_batch_settlement_evm_deposit_payload',
        'invalid_batch_settlement_evm_deposit_simulation_failed',
        false,
      ],
      ['deposit-permit2', 'invalid_batch_settlement_evm_permit2_invalid_signature', 'invalid_batch_settlement_evm_deposit_payload', 'invalid_batch_settlement_evm_deposit_simulation_failed', true],
      ['eip3009', 'invalid_exact_evm_signature', 'invalid_exact_evm_payload_authorization_value_mismatch', 'invalid_exact_evm_nonce_already_used', false],
      ['permit2', 'invalid_permit2_signature', 'permit2_amount_mismatch', 'permit2_invalid_nonce', true],
    ],
  );
});
