import { BatchReason, type BatchReasonCode } from './batch-settlement-reasons.ts';

/**
 * Machine-readable `invalidReason` codes, as the reference facilitator of `@x402/evm` names them
 * (protocols.md sections 2 and 3), plus the few gate402 adds where the reference has none.
 */
export const Eip3009Reason = {
  scheme: 'invalid_exact_evm_scheme',
  missingDomain: 'invalid_exact_evm_missing_eip712_domain',
  networkMismatch: 'invalid_exact_evm_network_mismatch',
  signature: 'invalid_exact_evm_signature',
  recipientMismatch: 'invalid_exact_evm_recipient_mismatch',
  validBefore: 'invalid_exact_evm_payload_authorization_valid_before',
  validAfter: 'invalid_exact_evm_payload_authorization_valid_after',
  valueMismatch: 'invalid_exact_evm_payload_authorization_value_mismatch',
  assetNotDeployed: 'asset_not_deployed_contract',
  nonceUsed: 'invalid_exact_evm_nonce_already_used',
  insufficientBalance: 'invalid_exact_evm_insufficient_balance',
  tokenNameMismatch: 'invalid_exact_evm_token_name_mismatch',
  tokenVersionMismatch: 'invalid_exact_evm_token_version_mismatch',
  eip3009NotSupported: 'invalid_exact_evm_eip3009_not_supported',
  simulationFailed: 'invalid_exact_evm_transaction_simulation_failed',
  transferEventMismatch: 'invalid_exact_evm_transfer_event_mismatch',
  transactionFailed: 'invalid_exact_evm_transaction_failed',
} as const;

export const Permit2Reason = {
  payloadType: 'unsupported_payload_type',
  networkMismatch: 'invalid_exact_evm_network_mismatch',
  spender: 'invalid_permit2_spender',
  recipientMismatch: 'invalid_permit2_recipient_mismatch',
  deadlineExpired: 'permit2_deadline_expired',
  notYetValid: 'permit2_not_yet_valid',
  amountMismatch: 'permit2_amount_mismatch',
  tokenMismatch: 'permit2_token_mismatch',
  assetNotDeployed: 'asset_not_deployed_contract',
  signature: 'invalid_permit2_signature',
  proxyNotDeployed: 'permit2_proxy_not_deployed',
  insufficientBalance: 'permit2_insufficient_balance',
  allowanceRequired: 'permit2_allowance_required',
  nonceUsed: 'permit2_invalid_nonce',
  simulationFailed: 'permit2_simulation_failed',
  transactionFailed: 'invalid_exact_evm_transaction_failed',
  /**
   * gate402's: the settlement mined without the Transfer it must log (the reference's Permit2 settle reads no log, and
   * its EIP-3009 code names the other scheme).
   */
  transferEventMismatch: 'permit2_transfer_event_mismatch',
} as const;

/**
 * The reference's shared codes for a request no scheme judges: an x402 version, scheme or network the facilitator
 * does not serve, and a payload or requirements object that is not what the scheme reads.
 */
export const RequestReason = {
  version: 'invalid_x402_version',
  unsupportedScheme: 'unsupported_scheme',
  invalidNetwork: 'invalid_network',
  invalidPayload: 'invalid_payload',
  invalidRequirements: 'invalid_payment_requirements',
} as const;

/**
 * gate402's own: an asset the operator did not configure is never settled (nor simulated); a payment to
 * its own payer, or to one of our relayers or contracts (or off the operator's payee allowlist), would only burn our
 * gas; a payer over its quota waits; a gateway settling through remote facilitators may find none of them answering.
 */
export const GatewayReason = {
  unsupportedAsset: 'unsupported_asset',
  payerIsPayee: 'payer_is_payee',
  payeeRefused: 'payee_not_allowed',
  /** The amount is below the network's live price floor: its settlement's gas would cost more than it moves. */
  belowPriceFloor: 'amount_below_price_floor',
  payerRateLimited: 'payer_rate_limited',
  nonceInFlight: 'payment_in_progress',
  unexpected: 'unexpected_verify_error',
  unexpectedSettle: 'unexpected_settle_error',
  /**
   * Settled through remote facilitators: none could take the payment, and none settled it; or the engine's store could
   * not record the signed settlement, so it was never sent (the nonce claim held, the chain read: nothing was charged).
   */
  settlementUnavailable: 'settlement_unavailable',
  /**
   * Whether the payment settled could not be learned (ask again with it): remote facilitators did not say, or the
   * engine's store could not be read or take the nonce claim (a database restarting).
   */
  settlementUnknown: 'settlement_outcome_unknown',
  /** A settlement from this payer, or from a contract with its code, reverted on chain after it passed simulation. */
  payerReverted: 'payer_reverted_before',
  /** Reverted settlements burnt the gas allowed for the hour (this payer's, its code's, or everyone's). */
  revertBudgetSpent: 'revert_gas_budget_spent',
  /** A contract whose code never settled here pays one payment at a time, and another is being settled (503). */
  contractPayerWaits: 'contract_payer_one_at_a_time',
} as const;

/**
 * gate402's codes for a payment that checked out and then failed on the settling side: its simulation or its
 * transaction could not be made (an RPC error, a node that refused the signed transaction).
 */
export const SettleFailureReason = {
  /** The simulation (alone, or of the batch the payment waited for) threw rather than answered. */
  simulationError: 'simulation_error',
  /** The node refused the signed transaction. */
  broadcastRejected: 'broadcast_rejected',
  /** Signing, the durable write before the send, or the send itself failed; or a batch ended before it was sent. */
  broadcastError: 'broadcast_error',
} as const;

type Values<T> = T[keyof T];
export type InvalidReason = Values<typeof Eip3009Reason> | Values<typeof Permit2Reason> | Values<typeof RequestReason> | Values<typeof GatewayReason> | BatchReasonCode;

/** Every reason a settlement step can fail with: a verification's, or the settling side's own. */
export type SettleReason = InvalidReason | Values<typeof SettleFailureReason>;

/**
 * Every reason the engine can answer a verification or a settlement with (`invalidReason`, `errorReason` of a failed
 * settlement, the `reason` label of its verification metric): what metrics pre-declare. Each once.
 */
export const SETTLEMENT_REASONS: readonly SettleReason[] = [
  ...new Set<SettleReason>([
    ...Object.values(Eip3009Reason),
    ...Object.values(Permit2Reason),
    ...Object.values(RequestReason),
    ...Object.values(GatewayReason),
    ...Object.values(SettleFailureReason),
    ...Object.values(BatchReason),
  ]),
];
