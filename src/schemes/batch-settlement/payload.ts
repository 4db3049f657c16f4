/**
 * The client payloads of the `batch-settlement` scheme (`PaymentPayload.payload`), parsed into typed values:
 * `deposit` (channel config, first voucher and a token authorization), `voucher` (config and the next voucher) and
 * `refund` (config, a zero-charge voucher and an optional amount). Malformed input gets the spec's reason for its
 * payload type; every nested object is closed, as the signed parts of the exact scheme are.
 */
import type { SchemaObject } from 'ajv';
import type { Address, Hex } from 'viem';
import { describeAjvError, MAX_SIGNATURE_BYTES, schemaCheck, type SchemaCheck } from '../../protocol/x402/codec.ts';
import { ADDRESS_PATTERN, BYTES32_PATTERN, SIGNATURE_PATTERN, UINT256_PATTERN } from '../../protocol/x402/schemas.ts';
import { err, ok, type Result } from '../../protocol/result.ts';
import type { ChannelConfig } from './channel-config.ts';
import { MAX_UINT128 } from './domain.ts';
import { BatchReason, type BatchReasonCode } from '../../verify/batch-settlement-reasons.ts';
import type { SignedVoucher } from './voucher.ts';

export interface Erc3009DepositAuthorization {
  kind: 'erc3009';
  validAfter: bigint;
  validBefore: bigint;
  /** The salt of the ERC-3009 nonce (`keccak256(abi.encode(channelId, salt))`). */
  salt: Hex;
  signature: Hex;
}

export interface Permit2DepositAuthorization {
  kind: 'permit2';
  from: Address;
  token: Address;
  amount: bigint;
  spender: Address;
  nonce: bigint;
  deadline: bigint;
  witnessChannelId: Hex;
  signature: Hex;
}

export type DepositAuthorization = Erc3009DepositAuthorization | Permit2DepositAuthorization;

export interface DepositPayload {
  type: 'deposit';
  config: ChannelConfig;
  voucher: SignedVoucher;
  deposit: { amount: bigint; authorization: DepositAuthorization };
}

export interface VoucherPayload {
  type: 'voucher';
  config: ChannelConfig;
  voucher: SignedVoucher;
}

export interface RefundPayload {
  type: 'refund';
  config: ChannelConfig;
  /** Zero-charge: its ceiling must equal what the server has charged so far. */
  voucher: SignedVoucher;
  /** Undefined: refund everything unclaimed. */
  amount?: bigint;
}

export type BatchPayload = DepositPayload | VoucherPayload | RefundPayload;

export const address: SchemaObject = { type: 'string', pattern: ADDRESS_PATTERN, eip55: true };
export const uint256: SchemaObject = { type: 'string', pattern: UINT256_PATTERN, uint256: true };
const bytes32: SchemaObject = { type: 'string', pattern: BYTES32_PATTERN };
export const signature: SchemaObject = { type: 'string', maxLength: 2 + 2 * MAX_SIGNATURE_BYTES, pattern: SIGNATURE_PATTERN };
export const closed = (properties: Record<string, SchemaObject>, optional: string[] = []): SchemaObject => ({
  type: 'object',
  additionalProperties: false,
  required: Object.keys(properties).filter((key) => !optional.includes(key)),
  properties,
});

export const channelConfigSchema = closed({
  payer: address,
  payerAuthorizer: address,
  receiver: address,
  receiverAuthorizer: address,
  token: address,
  withdrawDelay: { type: 'integer', minimum: 0, maximum: 2 ** 40 - 1 },
  salt: bytes32,
});
// channelId is any string here: a malformed one has a reason of its own (channel_id_invalid).
const voucherSchema = closed({ channelId: { type: 'string', maxLength: 128 }, maxClaimableAmount: uint256, signature });
const erc3009AuthorizationSchema = closed({ validAfter: uint256, validBefore: uint256, salt: bytes32, signature });
const permit2AuthorizationSchema = closed({
  from: address,
  permitted: closed({ token: address, amount: uint256 }),
  spender: address,
  nonce: uint256,
  deadline: uint256,
  witness: closed({ channelId: bytes32 }),
  signature,
});

const validators = {
  deposit: schemaCheck(
    closed({
      type: { const: 'deposit' },
      channelConfig: channelConfigSchema,
      voucher: voucherSchema,
      deposit: closed({
        amount: uint256,
        authorization: closed({ erc3009Authorization: erc3009AuthorizationSchema, permit2Authorization: permit2AuthorizationSchema }, ['erc3009Authorization', 'permit2Authorization']),
      }),
    }),
  ),
  voucher: schemaCheck(closed({ type: { const: 'voucher' }, channelConfig: channelConfigSchema, voucher: voucherSchema })),
  refund: schemaCheck(closed({ type: { const: 'refund' }, channelConfig: channelConfigSchema, voucher: voucherSchema, amount: { type: 'string', maxLength: 80 } }, ['amount'])),
} satisfies Record<BatchPayload['type'], SchemaCheck<unknown>>;

const shapeReason = { deposit: BatchReason.depositPayload, voucher: BatchReason.voucherPayload, refund: BatchReason.refundPayload } as const;

const CHANNEL_ID = /^0x[0-9a-fA-F]{64}$/;
const POSITIVE_DECIMAL = /^[1-9][0-9]{0,38}$/;

export interface WireConfig extends Omit<ChannelConfig, 'salt'> {
  salt: string;
}
interface WireVoucher {
  channelId: string;
  maxClaimableAmount: string;
  signature: string;
}

export function configOf(wire: WireConfig): ChannelConfig {
  return { ...wire, salt: wire.salt.toLowerCase() as Hex };
}

function voucherOf(wire: WireVoucher, type: BatchPayload['type']): Result<SignedVoucher, BatchReasonCode> {
  if (!CHANNEL_ID.test(wire.channelId)) return err(BatchReason.channelIdInvalid, '/voucher/channelId: must be a 0x-prefixed 32-byte hex string');
  const maxClaimableAmount = BigInt(wire.maxClaimableAmount);
  if (maxClaimableAmount > MAX_UINT128) return err(shapeReason[type], '/voucher/maxClaimableAmount: must fit in uint128');
  return ok({ channelId: wire.channelId.toLowerCase() as Hex, maxClaimableAmount, signature: wire.signature as Hex });
}

/** The `payload` of a `batch-settlement` PaymentPayload as a typed value, or the spec's reason it is not one. */
export function parseBatchPayload(value: unknown): Result<BatchPayload, BatchReasonCode> {
  const type = typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
  if (type !== 'deposit' && type !== 'voucher' && type !== 'refund') return err(BatchReason.payloadType, `payload.type must be deposit, voucher or refund, got ${JSON.stringify(type) ?? 'nothing'}`);
  const validate = validators[type];
  if (!validate(value)) return err(shapeReason[type], describeAjvError(validate.errors).message);
  const wire = value as { channelConfig: WireConfig; voucher: WireVoucher; amount?: string; deposit?: WireDeposit };
  const config = configOf(wire.channelConfig);
  const voucher = voucherOf(wire.voucher, type);
  if (!voucher.ok) return voucher;
  if (type === 'voucher') return ok({ type, config, voucher: voucher.value });
  if (type === 'refund') {
    if (wire.amount === undefined) return ok({ type, config, voucher: voucher.value });
    if (!POSITIVE_DECIMAL.test(wire.amount) || BigInt(wire.amount) > MAX_UINT128) return err(BatchReason.refundAmountInvalid, '/amount: must be a positive decimal integer that fits in uint128');
    return ok({ type, config, voucher: voucher.value, amount: BigInt(wire.amount) });
  }
  const deposit = depositOf(wire.deposit as WireDeposit);
  if (!deposit.ok) return deposit;
  return ok({ type, config, voucher: voucher.value, deposit: deposit.value });
}

interface WireDeposit {
  amount: string;
  authorization: {
    erc3009Authorization?: { validAfter: string; validBefore: string; salt: string; signature: string };
    permit2Authorization?: { from: Address; permitted: { token: Address; amount: string }; spender: Address; nonce: string; deadline: string; witness: { channelId: string }; signature: string };
  };
}

function depositOf(wire: WireDeposit): Result<DepositPayload['deposit'], BatchReasonCode> {
  const amount = BigInt(wire.amount);
  if (amount === 0n || amount > MAX_UINT128) return err(BatchReason.depositPayload, '/deposit/amount: must be positive and fit in uint128');
  const { erc3009Authorization: e, permit2Authorization: p } = wire.authorization;
  if ((e === undefined) === (p === undefined)) return err(BatchReason.depositPayload, '/deposit/authorization: must hold exactly one of erc3009Authorization and permit2Authorization');
  if (e) {
    return ok({ amount, authorization: { kind: 'erc3009', validAfter: BigInt(e.validAfter), validBefore: BigInt(e.validBefore), salt: e.salt.toLowerCase() as Hex, signature: e.signature as Hex } });
  }
  const permit = p!;
  return ok({
    amount,
    authorization: {
      kind: 'permit2',
      from: permit.from,
      token: permit.permitted.token,
      amount: BigInt(permit.permitted.amount),
      spender: permit.spender,
      nonce: BigInt(permit.nonce),
      deadline: BigInt(permit.deadline),
      witnessChannelId: permit.witness.channelId.toLowerCase() as Hex,
      signature: permit.signature as Hex,
    },
  });
}
