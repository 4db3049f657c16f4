/**
 * `Payment-Receipt` header: base64url (no padding) of the receipt's JSON, written in RFC 8785 canonical
 * form. mppx 0.11's `Receipt.deserialize` reads it (it requires `status: "success"`, `method`,
 * `reference` and an ISO 8601 `timestamp`, and keeps unknown keys such as ours).
 *
 * Signed receipts (our design; the spec names the receipt signed without fixing a format):
 * - the gateway adds `signer` (its address) and then `signature` = EIP-191 `personal_sign` by that key
 *   over the UTF-8 text {@link receiptSigningMessage}: the RFC 8785 canonical JSON of every receipt
 *   field except `signature` (so `signer` is covered).
 * - How a client checks a receipt:
 *   1. base64url-decode the `Payment-Receipt` header and `JSON.parse` it;
 *   2. check `signer` equals the gateway's published signing address (case-insensitive);
 *   3. delete `signature`, serialize the rest as RFC 8785 canonical JSON (sorted keys, no spaces);
 *   4. `viem.verifyMessage({ address: signer, message: <that text>, signature })` (or any EIP-191
 *      recover: keccak256("\x19Ethereum Signed Message:\n" + byteLength + text));
 *   5. check `reference` is the settlement transaction and `challengeId` the challenge it paid.
 *   {@link verifyReceipt} does steps 1-4.
 */
import type { SchemaObject } from 'ajv';
import { privateKeyToAccount } from 'viem/accounts';
import { verifyMessage } from 'viem';
import { MAX_HEADER_BYTES, decodeBase64Json, describeAjvError, encodeBase64Url, fail, ok, utf8, schemaCheck, type Result } from '../x402/codec.ts';
import { ADDRESS_PATTERN, SIGNATURE_PATTERN } from '../x402/schemas.ts';
import { canonicalJson } from './canonical-json.ts';
import { RFC3339_PATTERN } from './challenge.ts';
import type { HexString, PaymentReceipt, SignedPaymentReceipt } from './types.ts';

export const PAYMENT_RECEIPT_HEADER = 'Payment-Receipt';

const receiptProperties = {
  status: { type: 'string', const: 'success' },
  method: { type: 'string', const: 'evm' },
  reference: { type: 'string', pattern: '^0x[0-9a-fA-F]{64}$' },
  timestamp: { type: 'string', pattern: RFC3339_PATTERN },
  challengeId: { type: 'string', minLength: 1, maxLength: 512 },
  chainId: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
};

export const receiptSchema: SchemaObject = {
  type: 'object',
  required: ['status', 'method', 'reference', 'timestamp'],
  additionalProperties: false,
  properties: {
    ...receiptProperties,
    signer: { type: 'string', pattern: ADDRESS_PATTERN },
    signature: { type: 'string', maxLength: 1024, pattern: SIGNATURE_PATTERN },
  },
};

export const signedReceiptSchema: SchemaObject = {
  ...receiptSchema,
  required: ['status', 'method', 'reference', 'timestamp', 'signer', 'signature'],
};

const validateReceipt = schemaCheck<PaymentReceipt & Partial<SignedPaymentReceipt>>(receiptSchema);
const validateSignedReceipt = schemaCheck<SignedPaymentReceipt>(signedReceiptSchema);

/** The header value for a receipt, signed or not. Validates first (`invalid_value`). */
export function encodeReceipt(receipt: PaymentReceipt | SignedPaymentReceipt): Result<string> {
  if (!validateReceipt(receipt)) return fail('invalid_value', describeAjvError(validateReceipt.errors).message);
  const json = canonicalJson(receipt);
  return json.ok ? ok(encodeBase64Url(utf8(json.value))) : json;
}

/** Decodes a `Payment-Receipt` value (signed or not). */
export function decodeReceipt(encoded: string, maxChars: number = MAX_HEADER_BYTES): Result<PaymentReceipt & Partial<SignedPaymentReceipt>> {
  const json = decodeBase64Json(encoded, maxChars, 'url');
  if (!json.ok) return json;
  if (validateReceipt(json.value)) return ok(json.value);
  return fail('invalid_shape', describeAjvError(validateReceipt.errors).message);
}

/** The exact text that is personal_signed: canonical JSON of the receipt without `signature`. */
export function receiptSigningMessage(receipt: PaymentReceipt & { signer: string }): Result<string> {
  const { signature: _ignored, ...rest } = receipt as PaymentReceipt & { signer: string; signature?: string };
  return canonicalJson(rest);
}

/** Adds `signer` and `signature` (EIP-191 personal_sign with `privateKey`). */
export async function signReceipt(receipt: PaymentReceipt, privateKey: HexString): Promise<Result<SignedPaymentReceipt>> {
  let account: ReturnType<typeof privateKeyToAccount>;
  try {
    account = privateKeyToAccount(privateKey);
  } catch {
    return fail('invalid_value', 'invalid private key');
  }
  const { signature: _s, signer: _r, ...base } = receipt as PaymentReceipt & { signature?: unknown; signer?: unknown };
  const unsigned = { ...base, signer: account.address };
  if (!validateReceipt(unsigned)) return fail('invalid_value', describeAjvError(validateReceipt.errors).message);
  const message = receiptSigningMessage(unsigned);
  if (!message.ok) return message;
  const signature = await account.signMessage({ message: message.value });
  return ok({ ...unsigned, signer: account.address, signature });
}

/**
 * Decodes a signed `Payment-Receipt` value and checks it was signed by `expectedSigner`.
 * Codes: decoding codes, `invalid_shape` (unsigned receipt too), `signer_mismatch`, `invalid_signature`.
 */
export async function verifyReceipt(encoded: string, expectedSigner: string, maxChars: number = MAX_HEADER_BYTES): Promise<Result<SignedPaymentReceipt>> {
  const json = decodeBase64Json(encoded, maxChars, 'url');
  if (!json.ok) return json;
  const receipt = json.value;
  if (!validateSignedReceipt(receipt)) return fail('invalid_shape', describeAjvError(validateSignedReceipt.errors).message);
  if (typeof expectedSigner !== 'string' || receipt.signer.toLowerCase() !== expectedSigner.toLowerCase()) {
    return fail('signer_mismatch', `signed by ${receipt.signer}`);
  }
  const message = receiptSigningMessage(receipt);
  if (!message.ok) return message;
  let valid = false;
  try {
    valid = await verifyMessage({ address: receipt.signer, message: message.value, signature: receipt.signature });
  } catch {
    valid = false;
  }
  return valid ? ok(receipt) : fail('invalid_signature', 'receipt signature does not verify');
}
