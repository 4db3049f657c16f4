/**
 * The receiver side's payloads of the `batch-settlement` scheme, as the official server's channel manager sends them
 * to a facilitator's /settle: `claim` (vouchers of many channels claimed in one `claimWithSignature`, the batch signed
 * by the channels' receiver authorizer) and `settle` (one sweep of a receiver's claimed funds in a token). Parsed into
 * typed values with the spec's reasons; the calls they make are pure functions of them.
 */
import { encodeFunctionData, getAddress, recoverTypedDataAddress, type Address, type Hex } from 'viem';
import { describeAjvError, schemaCheck } from '../../protocol/x402/codec.ts';
import { err, ok, type Result } from '../../protocol/result.ts';
import { BatchReason, type BatchReasonCode } from '../../verify/batch-settlement-reasons.ts';
import { batchSettlementAbi } from './abi.ts';
import { claimBatchTypedData, voucherClaimArgs, type VoucherClaim } from './claim-batch.ts';
import { channelIdOf, type ChannelConfig } from './channel-config.ts';
import { MAX_UINT128 } from './domain.ts';
import { refundTypedData } from './refund.ts';
import { address, channelConfigSchema, closed, configOf, signature, uint256, type WireConfig } from './payload.ts';

/** The most rows one claim may hold here (the official channel manager sends at most 100 by default). */
export const MAX_CLAIM_ROWS = 100;

export interface ClaimOperation {
  type: 'claim';
  rows: VoucherClaim[];
  /** The receiver authorizer's signature of the rows' `ClaimBatch`: the contract checks it, so anyone may relay the claim. */
  authorizerSignature: Hex;
}

export interface SweepOperation {
  type: 'settle';
  receiver: Address;
  token: Address;
}

/** A cooperative refund as the official server sends it: the receiver authorizer's refund signature, and the claim of what was charged first. */
export interface RefundOperation {
  type: 'refund';
  config: ChannelConfig;
  amount: bigint;
  /** The contract's `refundNonce(channelId)` the signature is for. */
  nonce: bigint;
  refundSignature: Hex;
  /** The channel's charges claimed in the same transaction, before the refund; undefined when there are none. */
  claim?: ClaimOperation;
}

export type ReceiverOperation = ClaimOperation | SweepOperation | RefundOperation;

const claimRowsSchema = {
  type: 'array',
  maxItems: MAX_CLAIM_ROWS,
  items: closed({ voucher: closed({ channel: channelConfigSchema, maxClaimableAmount: uint256 }), signature, totalClaimed: uint256 }),
};
const refundCheck = schemaCheck(
  closed(
    {
      type: { const: 'refund' },
      channelConfig: channelConfigSchema,
      voucher: { type: 'object' },
      amount: uint256,
      refundNonce: uint256,
      claims: claimRowsSchema,
      refundAuthorizerSignature: signature,
      claimAuthorizerSignature: signature,
    },
    ['voucher', 'claims', 'claimAuthorizerSignature'],
  ),
);
const claimCheck = schemaCheck(
  closed(
    {
      type: { const: 'claim' },
      claims: {
        type: 'array',
        minItems: 1,
        maxItems: MAX_CLAIM_ROWS,
        items: closed({ voucher: closed({ channel: channelConfigSchema, maxClaimableAmount: uint256 }), signature, totalClaimed: uint256 }),
      },
      claimAuthorizerSignature: signature,
    },
    ['claimAuthorizerSignature'],
  ),
);
const sweepCheck = schemaCheck(closed({ type: { const: 'settle' }, receiver: address, token: address }));

/**
 * Whether a payload is one of the receiver side's (its `type`), without judging the rest of it. A refund is the
 * server's when it carries the receiver authorizer's signature (a payer's own refund request carries none).
 */
export function receiverOperationType(payload: unknown): ReceiverOperation['type'] | undefined {
  if (typeof payload !== 'object' || payload === null) return undefined;
  const type = (payload as { type?: unknown }).type;
  if (type === 'refund') return 'refundAuthorizerSignature' in payload ? 'refund' : undefined;
  return type === 'claim' || type === 'settle' ? type : undefined;
}

interface WireClaimRow {
  voucher: { channel: WireConfig; maxClaimableAmount: string };
  signature: string;
  totalClaimed: string;
}

/** A receiver-side payload as a typed value, or the spec's reason it is not one. */
export function parseReceiverOperation(payload: unknown): Result<ReceiverOperation, BatchReasonCode> {
  const type = receiverOperationType(payload);
  if (type === 'settle') {
    if (!sweepCheck(payload)) return err(BatchReason.settlePayload, describeAjvError(sweepCheck.errors).message);
    const wire = payload as { receiver: Address; token: Address };
    return ok({ type, receiver: getAddress(wire.receiver), token: getAddress(wire.token) });
  }
  if (type === 'refund') return refundOf(payload);
  if (type !== 'claim') return err(BatchReason.payloadType, `payload.type must be claim or settle, got ${JSON.stringify((payload as { type?: unknown } | null)?.type) ?? 'nothing'}`);
  if (!claimCheck(payload)) return err(BatchReason.claimPayload, describeAjvError(claimCheck.errors).message);
  return claimOf(payload as { claims: WireClaimRow[]; claimAuthorizerSignature?: string });
}

function refundOf(payload: unknown): Result<RefundOperation, BatchReasonCode> {
  if (!refundCheck(payload)) return err(BatchReason.refundPayload, describeAjvError(refundCheck.errors).message);
  const wire = payload as { channelConfig: WireConfig; amount: string; refundNonce: string; claims?: WireClaimRow[]; refundAuthorizerSignature: string; claimAuthorizerSignature?: string };
  const amount = BigInt(wire.amount);
  if (amount === 0n || amount > MAX_UINT128) return err(BatchReason.refundAmountInvalid, '/amount: must be positive and fit in uint128');
  const refund: RefundOperation = { type: 'refund', config: configOf(wire.channelConfig), amount, nonce: BigInt(wire.refundNonce), refundSignature: wire.refundAuthorizerSignature as Hex };
  if (!wire.claims || wire.claims.length === 0) return ok(refund);
  const claim = claimOf({ claims: wire.claims, ...(wire.claimAuthorizerSignature ? { claimAuthorizerSignature: wire.claimAuthorizerSignature } : {}) });
  if (!claim.ok) return err(BatchReason.refundPayload, claim.error.message);
  const channel = JSON.stringify(refund.config).toLowerCase();
  if (claim.value.rows.some((row) => JSON.stringify(row.config).toLowerCase() !== channel)) return err(BatchReason.refundPayload, "/claims: a refund claims its own channel's charges only");
  return ok({ ...refund, claim: claim.value });
}

function claimOf(wire: { claims: WireClaimRow[]; claimAuthorizerSignature?: string }): Result<ClaimOperation, BatchReasonCode> {
  // Without it only the receiver authorizer itself may send `claim`: this facilitator would be asked to pay for a
  // transaction it cannot make succeed.
  if (wire.claimAuthorizerSignature === undefined) {
    return err(BatchReason.claimPayload, "/claimAuthorizerSignature: this facilitator relays only claims signed by the channels' receiverAuthorizer (claimWithSignature)");
  }
  const rows: VoucherClaim[] = [];
  for (const [i, row] of wire.claims.entries()) {
    const maxClaimableAmount = BigInt(row.voucher.maxClaimableAmount);
    const totalClaimed = BigInt(row.totalClaimed);
    if (maxClaimableAmount > MAX_UINT128 || totalClaimed > maxClaimableAmount || totalClaimed === 0n) {
      return err(BatchReason.claimPayload, `/claims/${i}: totalClaimed must be positive and at most the voucher's maxClaimableAmount (uint128)`);
    }
    rows.push({ config: configOf(row.voucher.channel), maxClaimableAmount, signature: row.signature as Hex, totalClaimed });
  }
  return ok({ type: 'claim', rows, authorizerSignature: wire.claimAuthorizerSignature as Hex });
}

/** Who signed a claim's `ClaimBatch`; every row must name that address as its receiver authorizer, else a reason. */
export async function checkClaimSigner(op: ClaimOperation, chainId: number): Promise<Result<Address, BatchReasonCode>> {
  let signer: Address;
  try {
    signer = await recoverTypedDataAddress({ ...claimBatchTypedData(op.rows, chainId), signature: op.authorizerSignature });
  } catch {
    return err(BatchReason.claimPayload, '/claimAuthorizerSignature: not a signature of the claim batch');
  }
  const stranger = op.rows.findIndex((row) => getAddress(row.config.receiverAuthorizer) !== signer);
  if (stranger !== -1) return err(BatchReason.receiverAuthorizerMismatch, `/claims/${stranger}: the claim batch is not signed by this channel's receiverAuthorizer`);
  return ok(signer);
}

/** Whether a refund's signature is the receiver authorizer's, for its channel, amount and nonce (and its claim's too). */
export async function checkRefundSigners(op: RefundOperation, chainId: number): Promise<Result<undefined, BatchReasonCode>> {
  let signer: Address | undefined;
  try {
    signer = await recoverTypedDataAddress({ ...refundTypedData({ channelId: channelIdOf(op.config, chainId), nonce: op.nonce, amount: op.amount }, chainId), signature: op.refundSignature });
  } catch {}
  if (signer !== getAddress(op.config.receiverAuthorizer))
    return err(BatchReason.receiverAuthorizerMismatch, "/refundAuthorizerSignature: not the channel's receiverAuthorizer's signature of this refund");
  if (op.claim) {
    const claim = await checkClaimSigner(op.claim, chainId);
    if (!claim.ok) return claim;
  }
  return ok(undefined);
}

/** The settlement contract call of an operation. */
export function operationCallData(op: ReceiverOperation): Hex {
  if (op.type === 'settle') return encodeFunctionData({ abi: batchSettlementAbi, functionName: 'settle', args: [op.receiver, op.token] });
  if (op.type === 'refund') {
    const refund = encodeFunctionData({ abi: batchSettlementAbi, functionName: 'refundWithSignature', args: [op.config, op.amount, op.nonce, op.refundSignature] });
    if (!op.claim) return refund;
    return encodeFunctionData({ abi: batchSettlementAbi, functionName: 'multicall', args: [[operationCallData(op.claim), refund]] });
  }
  return encodeFunctionData({ abi: batchSettlementAbi, functionName: 'claimWithSignature', args: [voucherClaimArgs(op.rows), op.authorizerSignature] });
}

/**
 * What a claim moves in `token` (its smallest units): per channel of that token, how far its highest row raises what
 * the channel has claimed (`claimedBefore`). The contract skips a row that raises nothing and takes one channel's rows
 * in turn, so two rows of one channel move the higher one's raise once; rows of another token move nothing here.
 */
export function claimRaise(rows: readonly VoucherClaim[], channelIds: readonly Hex[], claimedBefore: ReadonlyMap<Hex, bigint>, token: Address): bigint {
  const highest = new Map<Hex, bigint>();
  for (const [i, row] of rows.entries()) {
    if (getAddress(row.config.token) !== getAddress(token)) continue;
    const id = channelIds[i] as Hex;
    if (row.totalClaimed > (highest.get(id) ?? 0n)) highest.set(id, row.totalClaimed);
  }
  let moved = 0n;
  for (const [id, total] of highest) {
    const before = claimedBefore.get(id) ?? 0n;
    if (total > before) moved += total - before;
  }
  return moved;
}
