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
import { MAX_UINT128 } from './domain.ts';
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

export type ReceiverOperation = ClaimOperation | SweepOperation;

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

/** Whether a payload is one of the receiver side's (its `type`), without judging the rest of it. */
export function receiverOperationType(payload: unknown): 'claim' | 'settle' | undefined {
  const type = typeof payload === 'object' && payload !== null ? (payload as { type?: unknown }).type : undefined;
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
  if (type !== 'claim') return err(BatchReason.payloadType, `payload.type must be claim or settle, got ${JSON.stringify((payload as { type?: unknown } | null)?.type) ?? 'nothing'}`);
  if (!claimCheck(payload)) return err(BatchReason.claimPayload, describeAjvError(claimCheck.errors).message);
  const wire = payload as { claims: WireClaimRow[]; claimAuthorizerSignature?: string };
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
  return ok({ type, rows, authorizerSignature: wire.claimAuthorizerSignature as Hex });
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

/** The settlement contract call of an operation. */
export function operationCallData(op: ReceiverOperation): Hex {
  if (op.type === 'settle') return encodeFunctionData({ abi: batchSettlementAbi, functionName: 'settle', args: [op.receiver, op.token] });
  return encodeFunctionData({ abi: batchSettlementAbi, functionName: 'claimWithSignature', args: [voucherClaimArgs(op.rows), op.authorizerSignature] });
}
