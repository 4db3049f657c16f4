/**
 * MPP wire types: the `Payment` HTTP authentication scheme, method `evm`, intent `charge`
 * (field names as `mppx` 0.11 sends and reads them).
 */

export type HexString = `0x${string}`;
export type HexAddress = `0x${string}`;

export const PAYMENT_SCHEME = 'Payment';
export const EVM_METHOD = 'evm';
export const CHARGE_INTENT = 'charge';

/** `methodDetails` of an `evm` charge request. */
export type EvmMethodDetails = {
  chainId: number;
  /** We always send `["authorization"]`; the mppx client refuses a challenge without `"authorization"`. */
  credentialTypes: string[];
  decimals: number;
  [key: string]: unknown;
};

/** The decoded `request` auth-param of an `evm`/`charge` challenge. Unknown keys are kept on decode. */
export type ChargeRequest = {
  /** Atomic units, canonical decimal string. */
  amount: string;
  /** Token address. */
  currency: HexAddress;
  recipient: HexAddress;
  methodDetails: EvmMethodDetails;
  [key: string]: unknown;
};

/**
 * One `Payment` challenge as carried in `WWW-Authenticate` and echoed inside a credential.
 * `request` stays encoded (base64url of canonical JSON): that exact string is what the id binds.
 */
export type PaymentChallenge = {
  id: string;
  realm: string;
  method: string;
  intent: string;
  request: string;
  /** RFC 3339 timestamp. */
  expires: string;
  description?: string;
  /** `sha-256=<base64>` of the request body, when bound. */
  digest?: string;
  /** Server correlation data, base64url; clients must not modify it. */
  opaque?: string;
};

/** The fields the challenge id binds (all of {@link PaymentChallenge} but `id` and `description`). */
export type ChallengeIdFields = {
  realm: string;
  method: string;
  intent: string;
  request: string;
  expires: string;
  digest?: string;
  opaque?: string;
};

/** Credential payload for `credentialTypes: ["authorization"]`: a signed EIP-3009 `TransferWithAuthorization`. */
export type AuthorizationPayload = {
  type: 'authorization';
  from: HexAddress;
  to: HexAddress;
  /** uint256 decimal. */
  value: string;
  /** Unix seconds, decimal. */
  validAfter: string;
  /** Unix seconds, decimal. */
  validBefore: string;
  /** bytes32; must equal keccak256(utf8(challenge.id + challenge.realm)). */
  nonce: HexString;
  signature: HexString;
};

/** The echoed challenge inside a credential (unknown keys such as mppx's `header` are tolerated and kept). */
export type EchoedChallenge = PaymentChallenge & { [key: string]: unknown };

/** The decoded `Authorization: Payment <token>` credential. */
export type PaymentCredential = {
  challenge: EchoedChallenge;
  /** `did:pkh:eip155:<chainId>:<address>` (mppx sends it, with the checksummed payer address). */
  source?: string;
  payload: AuthorizationPayload;
};

/** `Payment-Receipt` body. */
export type PaymentReceipt = {
  status: 'success';
  method: 'evm';
  /** Settlement transaction hash. */
  reference: HexString;
  /** RFC 3339. */
  timestamp: string;
  challengeId?: string;
  chainId?: number;
};

/** A receipt signed by the gateway (see `receipt.ts`). */
export type SignedPaymentReceipt = PaymentReceipt & {
  /** The gateway's signing address. */
  signer: HexAddress;
  /** EIP-191 personal_sign over {@link receiptSigningMessage}. */
  signature: HexString;
};

export type ProblemCode = 'payment-required' | 'payment-insufficient' | 'payment-expired' | 'verification-failed' | 'malformed-credential' | 'invalid-challenge' | 'method-unsupported';

/** RFC 9457 problem details body (`application/problem+json`). */
export type Problem = {
  type: `https://paymentauth.org/problems/${ProblemCode}`;
  title: string;
  status: 402 | 400;
  detail: string;
  challengeId?: string;
};
