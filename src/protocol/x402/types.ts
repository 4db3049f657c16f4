/**
 * x402 version 2 wire types (scheme `exact`, EVM networks), as sent in the `PAYMENT-REQUIRED`,
 * `PAYMENT-SIGNATURE` and `PAYMENT-RESPONSE` headers and in the facilitator's `/verify`, `/settle`
 * and `/supported` bodies. Field names and optionality follow `@x402/core` 2.27 (`types` in its dist).
 * Declared as type literals (not interfaces) so that values are assignable to the official types,
 * whose `payload`/`extra` are `Record<string, unknown>`.
 */

/** `0x` + 40 hex digits, any case. */
export type HexAddress = `0x${string}`;
/** `0x` + hex bytes. */
export type HexString = `0x${string}`;
/** CAIP-2 EVM network id, `eip155:<chainId>`. */
export type EvmNetwork = `eip155:${string}`;

/** Where the paid resource lives. Unknown keys are kept (the official types add serviceName, tags, iconUrl). */
export type ResourceInfo = {
  url: string;
  description?: string;
  mimeType?: string;
  serviceName?: string;
  tags?: string[];
  iconUrl?: string;
  [key: string]: unknown;
};

/** One payment offer. `amount` is in the asset's atomic units, as a decimal string. */
export type PaymentRequirements = {
  scheme: 'exact';
  network: EvmNetwork;
  amount: string;
  asset: HexAddress;
  payTo: HexAddress;
  /** Positive integer. */
  maxTimeoutSeconds: number;
  /**
   * EIP-3009: `{name, version}` (the token's EIP-712 domain). Permit2: `{assetTransferMethod: "permit2", ...}`.
   * Required here and in our schema, as in `@x402/core`'s type (its zod schema alone tolerates absence).
   */
  extra: Record<string, unknown>;
};

/** Body of the `PAYMENT-REQUIRED` header. */
export type PaymentRequired = {
  x402Version: 2;
  error?: string;
  resource: ResourceInfo;
  /** At least one. */
  accepts: PaymentRequirements[];
  extensions?: Record<string, unknown>;
};

export type Eip3009Authorization = {
  from: HexAddress;
  to: HexAddress;
  /** uint256, decimal. */
  value: string;
  /** Unix seconds, decimal. */
  validAfter: string;
  /** Unix seconds, decimal. */
  validBefore: string;
  /** bytes32. */
  nonce: HexString;
};

/** `exact` payload for EIP-3009 tokens (`transferWithAuthorization`). */
export type Eip3009Payload = {
  signature: HexString;
  authorization: Eip3009Authorization;
};

export type Permit2Authorization = {
  from: HexAddress;
  permitted: { token: HexAddress; amount: string };
  /** The exact-permit proxy. */
  spender: HexAddress;
  /** uint256, decimal (unordered Permit2 nonce). */
  nonce: string;
  /** Unix seconds, decimal. */
  deadline: string;
  witness: { to: HexAddress; validAfter: string };
};

/** `exact` payload for Permit2 tokens. */
export type Permit2Payload = {
  signature: HexString;
  permit2Authorization: Permit2Authorization;
};

export type ExactEvmPayload = Eip3009Payload | Permit2Payload;

/** Body of the `PAYMENT-SIGNATURE` header. Unknown top-level keys are tolerated and kept. */
export type PaymentPayload = {
  x402Version: 2;
  resource?: ResourceInfo;
  /** One of the server's offers, echoed. */
  accepted: PaymentRequirements;
  payload: ExactEvmPayload;
  extensions?: Record<string, unknown>;
};

/** Body of the `PAYMENT-RESPONSE` header and of the facilitator's `/settle` answer. */
export type SettleResponse = {
  success: boolean;
  /** `0x` + tx hash, or `""` on failure (except a pending settlement, which carries the broadcast hash). */
  transaction: string;
  network: EvmNetwork;
  payer?: string;
  errorReason?: string;
  errorMessage?: string;
  /** Our extension: the settlement was broadcast but not yet confirmed. */
  status?: 'pending';
  /** Settled atomic amount (official field, used by the `upto` scheme). */
  amount?: string;
  extensions?: Record<string, unknown>;
  extra?: Record<string, unknown>;
};

/** The facilitator's `/verify` answer. */
export type VerifyResponse = {
  isValid: boolean;
  invalidReason?: string;
  invalidMessage?: string;
  payer?: string;
  extensions?: Record<string, unknown>;
  extra?: Record<string, unknown>;
};

/** Body of facilitator `POST /verify`. */
export type VerifyRequest = {
  x402Version: 2;
  paymentPayload: PaymentPayload;
  paymentRequirements: PaymentRequirements;
};

/** Body of facilitator `POST /settle` (same shape as `/verify`). */
export type SettleRequest = VerifyRequest;

/** One kind a facilitator supports (decoded tolerantly: other versions, schemes and networks may be listed). */
export type SupportedKind = {
  x402Version: number;
  scheme: string;
  network: string;
  extra?: Record<string, unknown>;
};

/** The facilitator's `GET /supported` answer. */
export type SupportedResponse = {
  kinds: SupportedKind[];
  extensions: string[];
  /** CAIP-2 pattern (e.g. `eip155:*`) to the facilitator's signer addresses. */
  signers: Record<string, string[]>;
};

export function isPermit2Payload(p: ExactEvmPayload): p is Permit2Payload {
  return 'permit2Authorization' in p;
}
