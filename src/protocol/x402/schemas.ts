/**
 * JSON Schemas of the x402 v2 wire objects, compiled once at module load with a strict Ajv.
 *
 * Tolerance policy (what the official `@x402/core`/`@x402/fetch` 2.27 client sends must pass):
 * - `extra` is required in PaymentRequirements (an object, possibly empty), as in the official TS type;
 * - unknown keys are allowed and kept in `PaymentRequired`, `PaymentRequirements`, `PaymentPayload`,
 *   `resource`, `extra`, `extensions` and the facilitator answers (the official client adds `resource`
 *   and `extensions` to a PaymentPayload; `extensions` may be absent);
 * - the signed inner `payload` is closed: exactly `{signature, authorization}` (EIP-3009) or
 *   `{signature, permit2Authorization}` (Permit2), chosen by the presence of `permit2Authorization`,
 *   with every nested object closed too.
 * - numbers on the wire are canonical decimal strings below 2^256 (no sign, no leading zero, no exponent).
 */
import type { SchemaObject } from 'ajv';
import { MAX_SIGNATURE_BYTES, describeAjvError, fail, ok, schemaCheck, type Result, type SchemaCheck } from './codec.ts';
import type { PaymentPayload, PaymentRequired, PaymentRequirements, SettleResponse, SupportedResponse, VerifyRequest, VerifyResponse } from './types.ts';

export const ADDRESS_PATTERN = '^0x[0-9a-fA-F]{40}$';
export const UINT256_PATTERN = '^(0|[1-9][0-9]{0,77})$';
export const BYTES32_PATTERN = '^0x[0-9a-fA-F]{64}$';
export const SIGNATURE_PATTERN = '^0x([0-9a-fA-F]{2})+$';
/** Stricter than `eip155:[0-9]{1,12}`: no chain id 0 and no leading zeros, so equal networks are equal strings. */
export const NETWORK_PATTERN = '^eip155:[1-9][0-9]{0,11}$';
/** Upper bound on `maxTimeoutSeconds` (keeps `now + maxTimeoutSeconds` a safe integer). */
export const MAX_TIMEOUT_SECONDS = 0xffffffff;

const address: SchemaObject = { type: 'string', pattern: ADDRESS_PATTERN, eip55: true };
const uint256: SchemaObject = { type: 'string', pattern: UINT256_PATTERN, uint256: true };
const bytes32: SchemaObject = { type: 'string', pattern: BYTES32_PATTERN };
const signature: SchemaObject = { type: 'string', maxLength: 2 + 2 * MAX_SIGNATURE_BYTES, pattern: SIGNATURE_PATTERN };
const network: SchemaObject = { type: 'string', pattern: NETWORK_PATTERN };
const openObject: SchemaObject = { type: 'object' };

export const resourceInfoSchema: SchemaObject = {
  type: 'object',
  required: ['url'],
  properties: {
    url: { type: 'string', minLength: 1 },
    description: { type: 'string' },
    mimeType: { type: 'string' },
    serviceName: { type: 'string' },
    tags: { type: 'array', items: { type: 'string' } },
    iconUrl: { type: 'string' },
  },
};

export const paymentRequirementsSchema: SchemaObject = {
  type: 'object',
  required: ['scheme', 'network', 'amount', 'asset', 'payTo', 'maxTimeoutSeconds', 'extra'],
  properties: {
    scheme: { type: 'string', const: 'exact' },
    network,
    amount: uint256,
    asset: address,
    payTo: address,
    maxTimeoutSeconds: { type: 'integer', minimum: 1, maximum: MAX_TIMEOUT_SECONDS },
    extra: openObject,
  },
};

/**
 * An offer of a 402's `accepts`: requirements of `exact`, or of `batch-settlement` (payment channels, whose `extra`
 * carries the channel's terms); a payer takes the schemes it knows. A payment (`accepted`, a verify request) is `exact`.
 */
const offerSchema: SchemaObject = {
  ...paymentRequirementsSchema,
  properties: { ...(paymentRequirementsSchema.properties as Record<string, SchemaObject>), scheme: { type: 'string', enum: ['exact', 'batch-settlement'] } },
};

export const paymentRequiredSchema: SchemaObject = {
  type: 'object',
  required: ['x402Version', 'resource', 'accepts'],
  properties: {
    x402Version: { const: 2 },
    error: { type: 'string' },
    resource: resourceInfoSchema,
    accepts: { type: 'array', minItems: 1, maxItems: 64, items: offerSchema },
    extensions: openObject,
  },
};

export const eip3009PayloadSchema: SchemaObject = {
  type: 'object',
  required: ['signature', 'authorization'],
  additionalProperties: false,
  properties: {
    signature,
    authorization: {
      type: 'object',
      required: ['from', 'to', 'value', 'validAfter', 'validBefore', 'nonce'],
      additionalProperties: false,
      properties: { from: address, to: address, value: uint256, validAfter: uint256, validBefore: uint256, nonce: bytes32 },
    },
  },
};

export const permit2PayloadSchema: SchemaObject = {
  type: 'object',
  required: ['signature', 'permit2Authorization'],
  additionalProperties: false,
  properties: {
    signature,
    permit2Authorization: {
      type: 'object',
      required: ['from', 'permitted', 'spender', 'nonce', 'deadline', 'witness'],
      additionalProperties: false,
      properties: {
        from: address,
        permitted: {
          type: 'object',
          required: ['token', 'amount'],
          additionalProperties: false,
          properties: { token: address, amount: uint256 },
        },
        spender: address,
        nonce: uint256,
        deadline: uint256,
        witness: {
          type: 'object',
          required: ['to', 'validAfter'],
          additionalProperties: false,
          properties: { to: address, validAfter: uint256 },
        },
      },
    },
  },
};

/** Exactly one of the two `exact` payload shapes, discriminated by the presence of `permit2Authorization`. */
export const exactEvmPayloadSchema: SchemaObject = {
  type: 'object',
  if: { type: 'object', properties: { permit2Authorization: true }, required: ['permit2Authorization'] },
  // biome-ignore lint/suspicious/noThenProperty: `then` is the JSON-schema keyword paired with `if`
  then: permit2PayloadSchema,
  else: eip3009PayloadSchema,
};

export const paymentPayloadSchema: SchemaObject = {
  type: 'object',
  required: ['x402Version', 'accepted', 'payload'],
  properties: {
    x402Version: { const: 2 },
    accepted: paymentRequirementsSchema,
    payload: exactEvmPayloadSchema,
    resource: resourceInfoSchema,
    extensions: openObject,
  },
};

export const settleResponseSchema: SchemaObject = {
  type: 'object',
  required: ['success', 'transaction', 'network'],
  properties: {
    success: { type: 'boolean' },
    transaction: { type: 'string', pattern: '^(0x[0-9a-fA-F]{64})?$' },
    network,
    payer: { type: 'string', pattern: '^(0x[0-9a-fA-F]{40})?$' },
    errorReason: { type: 'string', maxLength: 256 },
    errorMessage: { type: 'string', maxLength: 4096 },
    status: { type: 'string', const: 'pending' },
    amount: uint256,
    extensions: openObject,
    extra: openObject,
  },
};

export const verifyResponseSchema: SchemaObject = {
  type: 'object',
  required: ['isValid'],
  properties: {
    isValid: { type: 'boolean' },
    invalidReason: { type: 'string', maxLength: 256 },
    invalidMessage: { type: 'string', maxLength: 4096 },
    payer: { type: 'string', pattern: '^(0x[0-9a-fA-F]{40})?$' },
    extensions: openObject,
    extra: openObject,
  },
};

export const facilitatorRequestSchema: SchemaObject = {
  type: 'object',
  required: ['x402Version', 'paymentPayload', 'paymentRequirements'],
  properties: {
    x402Version: { const: 2 },
    paymentPayload: paymentPayloadSchema,
    paymentRequirements: paymentRequirementsSchema,
  },
};

export const supportedResponseSchema: SchemaObject = {
  type: 'object',
  required: ['kinds', 'extensions', 'signers'],
  properties: {
    kinds: {
      type: 'array',
      maxItems: 1024,
      items: {
        type: 'object',
        required: ['x402Version', 'scheme', 'network'],
        properties: {
          x402Version: { type: 'integer' },
          scheme: { type: 'string' },
          network: { type: 'string' },
          extra: openObject,
        },
      },
    },
    extensions: { type: 'array', items: { type: 'string' } },
    signers: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } },
  },
};

/** Probe run before the full schema so that a v1 (or v3) object reports `unsupported_version`, not a missing field. */
const versionProbeSchema: SchemaObject = {
  type: 'object',
  required: ['x402Version'],
  properties: { x402Version: { const: 2 } },
};

const validators = {
  version: schemaCheck(versionProbeSchema),
  paymentRequirements: schemaCheck<PaymentRequirements>(paymentRequirementsSchema),
  paymentRequired: schemaCheck<PaymentRequired>(paymentRequiredSchema),
  paymentPayload: schemaCheck<PaymentPayload>(paymentPayloadSchema),
  settleResponse: schemaCheck<SettleResponse>(settleResponseSchema),
  verifyResponse: schemaCheck<VerifyResponse>(verifyResponseSchema),
  facilitatorRequest: schemaCheck<VerifyRequest>(facilitatorRequestSchema),
  supportedResponse: schemaCheck<SupportedResponse>(supportedResponseSchema),
};

/** Maps the first schema error to a codec error: version, scheme and network get their own codes. */
function classify(validate: SchemaCheck<unknown>): Result<never> {
  const d = describeAjvError(validate.errors);
  const field = d.path.slice(d.path.lastIndexOf('/') + 1);
  if (field === 'x402Version' && d.keyword === 'const') return fail('unsupported_version', `${d.path}: must be 2`);
  if (field === 'scheme' && d.keyword === 'const') return fail('unsupported_scheme', `${d.path}: only "exact" is supported`);
  if (field === 'network' && d.keyword === 'pattern') return fail('unsupported_network', `${d.path}: must be eip155:<chainId>`);
  return fail('invalid_shape', d.message);
}

function check<T>(validate: SchemaCheck<T>, value: unknown, versioned: boolean): Result<T> {
  if (versioned && !validators.version(value)) return classify(validators.version);
  return validate(value) ? ok(value) : classify(validate);
}

export const validatePaymentRequirements = (v: unknown): Result<PaymentRequirements> => check(validators.paymentRequirements, v, false);
export const validatePaymentRequired = (v: unknown): Result<PaymentRequired> => check(validators.paymentRequired, v, true);
export const validatePaymentPayload = (v: unknown): Result<PaymentPayload> => check(validators.paymentPayload, v, true);
export const validateSettleResponse = (v: unknown): Result<SettleResponse> => check(validators.settleResponse, v, false);
export const validateVerifyResponse = (v: unknown): Result<VerifyResponse> => check(validators.verifyResponse, v, false);
export const validateFacilitatorRequest = (v: unknown): Result<VerifyRequest> => check(validators.facilitatorRequest, v, true);
export const validateSupportedResponse = (v: unknown): Result<SupportedResponse> => check(validators.supportedResponse, v, false);
