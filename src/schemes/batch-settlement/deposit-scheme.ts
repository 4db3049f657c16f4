/**
 * The deposit of an x402 `batch-settlement` channel as a payment scheme of the engine: the channel's first (or a
 * further) deposit is one signed token authorization spent by one transaction, exactly like an `exact` payment, so it
 * rides the same durable actor, nonce claim, simulation, revert budget, batching and reconciliation. Two schemes, one
 * per collector: ERC-3009 `receiveWithAuthorization` (Base, Base Sepolia) and Permit2 witness transfers (the stock
 * chain). Their checks follow the official facilitator's order (`@x402/evm` 2.27.0 `verifyDeposit`), so both give
 * the same reason for the same payload.
 */
import { getAddress, hashTypedData, type Address, type Hex } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS } from '../../chain/canonical.ts';
import { chainIdOf } from '../../chain/canonical.ts';
import { err, ok } from '../../protocol/result.ts';
import type { ExactEvmPayload, VerifyRequest } from '../../protocol/x402/types.ts';
import { refusedPayer } from '../../verify/checks.ts';
import { eip3009Consumption } from '../eip3009/consumption.ts';
import { eip3009NonceKey } from '../eip3009/nonce-key.ts';
import { movedExactly, transferEvent } from '../erc20-transfers.ts';
import { rangesBelow } from '../log-ranges.ts';
import { nonceBitmapAbi } from '../permit2/abi.ts';
import { permit2NonceKey } from '../permit2/nonce-key.ts';
import type { Consumption, ConsumptionReads, PaymentScheme, SettlementCall } from '../scheme.ts';
import { checkChannelBinding, checkDepositAuthorizationTerms, checkOfferEnvelope } from './binding.ts';
import { channelStateOf, permit2Allowance, readChannel, tokenBalance } from './channel-reads.ts';
import { erc3009DepositNonce } from './collector-data.ts';
import { erc3009DepositTypedData, permit2DepositTypedData } from './deposit-call.ts';
import { decodeDepositCall, depositSettlementCall, type DepositMethod } from './deposit-settlement-call.ts';
import { BATCH_SETTLEMENT_SCHEME } from './domain.ts';
import { parseBatchPayload, type DepositPayload } from './payload.ts';
import { BatchReason } from '../../verify/batch-settlement-reasons.ts';
import { transferMethodOf, type BatchSettlementRequirements } from './requirements.ts';
import { voucherSignedFor } from './voucher-signature.ts';

/** Parsed payloads, by payload object (the engine asks several questions of one payload). */
const parsed = new WeakMap<object, DepositPayload | null>();

/** The deposit a `batch-settlement` payload holds, or undefined when it holds none (another type, or malformed). */
export function depositOf(payload: unknown): DepositPayload | undefined {
  if (typeof payload !== 'object' || payload === null) return undefined;
  let hit = parsed.get(payload);
  if (hit === undefined) {
    const p = parseBatchPayload(payload);
    hit = p.ok && p.value.type === 'deposit' ? p.value : null;
    parsed.set(payload, hit);
  }
  return hit ?? undefined;
}

const isBatch = (req: { scheme: string }): boolean => req.scheme === BATCH_SETTLEMENT_SCHEME;
const offerOf = (request: VerifyRequest): BatchSettlementRequirements => request.paymentRequirements as unknown as BatchSettlementRequirements;

function own(payload: ExactEvmPayload | unknown): DepositPayload {
  const d = depositOf(payload);
  if (!d) throw new TypeError('not a batch-settlement deposit');
  return d;
}

/** The refusal of a deposit's chain check, naming its payer. */
const refuse = (code: (typeof BatchReason)[keyof typeof BatchReason], message: string, payer: Address) => refusedPayer({ code, message }, payer);

function depositScheme(method: DepositMethod): PaymentScheme {
  const carries = (payload: ExactEvmPayload | unknown): boolean => depositOf(payload)?.deposit.authorization.kind === method;
  return {
    name: method === 'erc3009' ? 'deposit-eip3009' : 'deposit-permit2',
    reasons: {
      signature: method === 'erc3009' ? BatchReason.receiveAuthorizationSignature : BatchReason.permit2InvalidSignature,
      // The token's code is checked by the engine; the official facilitator's simulation is what fails without it.
      assetNotDeployed: BatchReason.depositSimulationFailed,
      amountMismatch: BatchReason.depositPayload,
      // A used authorization: the official facilitator's simulation fails on it.
      nonceUsed: BatchReason.depositSimulationFailed,
      transactionFailed: BatchReason.depositTransactionFailed,
      simulationFailed: BatchReason.depositSimulationFailed,
      transferEventMismatch: BatchReason.depositTransactionFailed,
      insufficientBalance: BatchReason.insufficientBalance,
    },
    assetCheckedFirst: method === 'permit2',
    asks: (req) => isBatch(req) && (transferMethodOf(req as unknown as BatchSettlementRequirements) === 'permit2') === (method === 'permit2'),
    // Offers of the scheme are the front door's (requirements.ts); the engine offers no `exact` extra for it.
    requirementsExtra: () => undefined,
    carries,
    payer: (payload) => own(payload).config.payer,

    check({ requirements, accepted, payload: raw, network, token, now }) {
      const offer = requirements as unknown as BatchSettlementRequirements;
      const parsedPayload = depositOf(raw);
      const envelope = checkOfferEnvelope(offer, accepted);
      if (!envelope.ok) return refusedPayer(envelope.error, parsedPayload?.config.payer);
      if (!parsedPayload) return err(BatchReason.payloadType, 'the payload is not a deposit');
      const payload = parsedPayload;
      const payer = payload.config.payer;
      const binding = checkChannelBinding(payload.config, payload.voucher.channelId, offer);
      if (!binding.ok) return refusedPayer(binding.error, payer);
      // As the official facilitator: a Permit2 offer paid without a Permit2 authorization is no deposit payload of it.
      if (method === 'permit2' && payload.deposit.authorization.kind !== 'permit2') return refuse(BatchReason.payloadType, 'the offer takes deposits by Permit2 authorization', payer);
      const terms = checkDepositAuthorizationTerms(payload, offer, now);
      if (!terms.ok) return refusedPayer(terms.error, payer);
      if (getAddress(payload.config.token) !== getAddress(token.address)) return refuse(BatchReason.tokenMismatch, `the channel's token is ${payload.config.token}`, payer);
      const auth = payload.deposit.authorization;
      const digest: Hex =
        auth.kind === 'erc3009'
          ? hashTypedData(
              erc3009DepositTypedData({ ...payload, deposit: { ...payload.deposit, authorization: auth } }, { name: String(offer.extra.name), version: String(offer.extra.version) }, network.chainId),
            )
          : hashTypedData(permit2DepositTypedData(auth, network.chainId));
      return { ok: true, payer, payee: payload.config.receiver, amount: payload.deposit.amount, digest, signature: auth.signature, call: depositSettlementCall(payload) };
    },

    settlementCall: (payload) => depositSettlementCall(own(payload)),
    decodeCall: (to, data) => decodeDepositCall(method, to, data),

    expectedTransfer(request) {
      return depositSettlementCall(own(request.paymentPayload.payload)).expect;
    },

    nonceKey(request) {
      const d = own(request.paymentPayload.payload);
      const auth = d.deposit.authorization;
      const network = request.paymentRequirements.network;
      // The token's (ERC-3009) or Permit2's own nonce: the same key an `exact` payment spending it would claim.
      if (auth.kind === 'erc3009') return eip3009NonceKey(network, d.config.token, d.config.payer, erc3009DepositNonce(d.voucher.channelId, auth.salt));
      return permit2NonceKey(network, auth.from, auth.nonce);
    },

    // What the chain shows was checked before the simulation (the payer's balance, the channel); a revert beyond that
    // is what the official facilitator calls a failed deposit simulation (a used authorization among them).
    diagnoseRevert: async () => BatchReason.depositSimulationFailed,

    consumption(reads, payload, call) {
      const d = own(payload);
      const auth = d.deposit.authorization;
      if (auth.kind === 'erc3009') return eip3009Consumption(reads, call.expect, erc3009DepositNonce(d.voucher.channelId, auth.salt));
      return permit2DepositConsumption(reads, call, auth.nonce);
    },

    async chainCheck(reads, request, payer) {
      const d = own(request.paymentPayload.payload);
      const offer = offerOf(request);
      const chainId = chainIdOf(offer.network);
      const client = reads.client;
      const amount = d.deposit.amount;
      if (method === 'permit2') {
        const allowance = await permit2Allowance(client, d.config.token, payer).catch(() => -1n);
        if (allowance < amount) return refuse(BatchReason.permit2AllowanceRequired, 'the payer has not approved Permit2 for the deposit', payer);
      }
      if (!(await voucherSignedFor(reads, d.config, d.voucher, chainId))) return refuse(BatchReason.voucherSignature, "the voucher is not signed by the channel's payer", payer);
      let channel: Awaited<ReturnType<typeof readChannel>>;
      let balance: bigint;
      try {
        [channel, balance] = await Promise.all([readChannel(client, d.voucher.channelId), tokenBalance(client, d.config.token, payer)]);
      } catch (error) {
        return refuse(BatchReason.rpcReadFailed, `could not read the channel: ${(error as Error).message.slice(0, 200)}`, payer);
      }
      if (balance < amount) return refuse(BatchReason.insufficientBalance, `the payer holds ${balance}, the deposit is ${amount}`, payer);
      const ceiling = d.voucher.maxClaimableAmount;
      if (ceiling > channel.balance + amount)
        return refuse(BatchReason.cumulativeExceedsBalance, `voucher ceiling ${ceiling} exceeds the channel balance after the deposit, ${channel.balance + amount}`, payer);
      // The official facilitator refuses a ceiling at or below what is claimed (the spec's rule 10 asks for the price on top).
      if (ceiling <= channel.totalClaimed) return refuse(BatchReason.cumulativeBelowClaimed, `voucher ceiling ${ceiling} does not exceed the claimed ${channel.totalClaimed}`, payer);
      return ok(channelStateOf(d.voucher.channelId, channel));
    },

    async settledDetails(reads, request) {
      const d = own(request.paymentPayload.payload);
      const amount = d.deposit.amount.toString();
      try {
        return { amount, extra: { channelState: channelStateOf(d.voucher.channelId, await readChannel(reads.client, d.voucher.channelId)) } };
      } catch {
        return { amount };
      }
    },
  };
}

/**
 * Whether a deposit's Permit2 nonce was consumed, and by which transaction: the nonce's bit is set, and a transaction
 * that moved exactly the deposit from the payer to the settlement contract ran exactly this deposit call (sent to the
 * settlement contract, or as a settled call of a batch through the chain's Multicall3).
 */
async function permit2DepositConsumption(reads: ConsumptionReads, call: SettlementCall, nonce: bigint): Promise<Consumption> {
  const { client, search } = reads;
  const { expect } = call;
  const head = await client.getBlockNumber({ cacheTime: 0 });
  const word = await client.readContract({ address: reads.chain.permit2, abi: nonceBitmapAbi, functionName: 'nonceBitmap', args: [expect.from, nonce >> 8n], blockNumber: head });
  if ((word & (1n << (nonce & 0xffn))) === 0n) return { consumed: false };
  for (const range of rangesBelow(head, search)) {
    const logs = await client.getLogs({ address: expect.token, event: transferEvent, args: { from: expect.from, to: expect.to }, ...range });
    for (const log of [...logs].reverse()) {
      if (log.args.value !== expect.value || !log.transactionHash || log.blockNumber === null) continue;
      const [tx, receipt] = await Promise.all([client.getTransaction({ hash: log.transactionHash }), client.getTransactionReceipt({ hash: log.transactionHash })]);
      if (receipt.status !== 'success' || !tx.to) continue;
      const direct = tx.to.toLowerCase() === BATCH_SETTLEMENT_ADDRESS.toLowerCase() && tx.input.toLowerCase() === call.data.toLowerCase() && movedExactly(receipt.logs, expect);
      const batched =
        !!reads.chain.multicall &&
        tx.to.toLowerCase() === reads.chain.multicall.toLowerCase() &&
        reads.settledBatchCalls(tx.input, receipt).some((c) => c.to.toLowerCase() === call.to.toLowerCase() && c.data.toLowerCase() === call.data.toLowerCase());
      if (direct || batched) return { consumed: true, transaction: log.transactionHash, blockNumber: log.blockNumber };
    }
  }
  return { consumed: true, why: `the Permit2 nonce is used or invalidated, and no transaction in the last ${search.lookbackBlocks} blocks ran this deposit` };
}

/** Deposits into `batch-settlement` channels through the ERC-3009 collector. */
export const erc3009DepositScheme: PaymentScheme = depositScheme('erc3009');
/** Deposits into `batch-settlement` channels through the Permit2 collector. */
export const permit2DepositScheme: PaymentScheme = depositScheme('permit2');
