/**
 * The JSON Schemas of a `POST /api/merchants` body, compiled once, and the one message a failed one answers with.
 * What a schema cannot say is checked in code (`validate.ts`).
 */
import type { ErrorObject, SchemaObject } from 'ajv';
import { schemaCheck } from '../../protocol/x402/codec.ts';
import {
  HARD_MAX_ROUTES,
  MAX_FILE_NAME,
  MAX_HEADER_VALUE,
  MAX_INPUT,
  MAX_MERCHANT_DESCRIPTION,
  MAX_NAME,
  MAX_NETWORKS,
  MAX_ROUTE_DESCRIPTION,
  MAX_SECRET_HEADERS,
  MAX_SUMMARY,
  MAX_URL,
  PRICE,
} from './registration-limits.ts';
import type { DeleteRegistration, Registration, UpstreamInput } from './types.ts';

export const SLUG = /^[a-z0-9](?:[a-z0-9-]{1,38}[a-z0-9])$/;
export const ROUTE_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

const SINGLE_LINE = '^[^\\u0000-\\u001F\\u007F]*$';
const MULTI_LINE = '^[^\\u0000-\\u0008\\u000B-\\u001F\\u007F]*$';
const text = (max: number, multiline: boolean): SchemaObject => ({ type: 'string', maxLength: max, pattern: multiline ? MULTI_LINE : SINGLE_LINE });

const routeSchema: SchemaObject = {
  type: 'object',
  additionalProperties: false,
  required: ['route', 'methods', 'priceUsd', 'summary', 'description', 'input'],
  properties: {
    route: { type: 'string', pattern: ROUTE_NAME.source },
    methods: { type: 'array', minItems: 1, maxItems: 2, uniqueItems: true, items: { type: 'string', enum: ['GET', 'POST'] } },
    priceUsd: { type: 'string', maxLength: 20, pattern: PRICE.source },
    summary: { ...text(MAX_SUMMARY, false), minLength: 1 },
    description: text(MAX_ROUTE_DESCRIPTION, true),
    input: text(MAX_INPUT, true),
    requirePaymentId: { type: 'boolean' },
    batchSettlement: { type: 'boolean' },
  },
};

const registrationProperties: Record<string, SchemaObject> = {
  action: { type: 'string', enum: ['register', 'update', 'delete'] },
  slug: { type: 'string', maxLength: 40, pattern: SLUG.source },
  name: { ...text(MAX_NAME, false), minLength: 1 },
  description: text(MAX_MERCHANT_DESCRIPTION, true),
  payTo: { type: 'string', pattern: ADDRESS.source },
  networks: {
    type: 'array',
    minItems: 1,
    maxItems: MAX_NETWORKS,
    uniqueItems: true,
    items: { type: 'string', maxLength: 64, pattern: '^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$' },
  },
  upstream: { type: 'object', required: ['kind'], properties: { kind: { type: 'string', enum: ['url', 'file'] } } },
  routes: { type: 'array', minItems: 1, maxItems: HARD_MAX_ROUTES, items: routeSchema },
  nonce: { type: 'string', minLength: 8, maxLength: 128, pattern: '^[\\x21-\\x7E]*$' },
  issuedAt: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
};

const upsertSchema: SchemaObject = {
  type: 'object',
  additionalProperties: false,
  required: ['action', 'slug', 'name', 'description', 'payTo', 'networks', 'upstream', 'routes', 'nonce', 'issuedAt'],
  properties: registrationProperties,
};

const deleteSchema: SchemaObject = {
  type: 'object',
  additionalProperties: false,
  required: ['action', 'slug', 'payTo', 'nonce', 'issuedAt'],
  properties: registrationProperties,
};

const requestSchema: SchemaObject = {
  type: 'object',
  additionalProperties: false,
  required: ['registration', 'signature'],
  properties: {
    registration: { type: 'object', required: ['action'], properties: { action: registrationProperties.action! } },
    signature: { type: 'string', pattern: '^0x[0-9a-fA-F]{130}$' },
  },
};

const urlUpstreamSchema: SchemaObject = {
  type: 'object',
  additionalProperties: false,
  required: ['kind', 'baseUrl'],
  properties: {
    kind: { type: 'string', const: 'url' },
    baseUrl: { type: 'string', minLength: 1, maxLength: MAX_URL },
    secretHeaders: { type: 'object', maxProperties: MAX_SECRET_HEADERS, additionalProperties: { type: 'string', maxLength: MAX_HEADER_VALUE } },
  },
};

const fileUpstreamSchema: SchemaObject = {
  type: 'object',
  additionalProperties: false,
  required: ['kind', 'fileName', 'contentType', 'contentBase64'],
  properties: {
    kind: { type: 'string', const: 'file' },
    fileName: { type: 'string', minLength: 1, maxLength: MAX_FILE_NAME },
    contentType: { type: 'string', minLength: 3, maxLength: 200 },
    // Length (bounded by the configured file size) and alphabet are checked in code: a schema keyword would walk
    // up to 14 MB of text character by character.
    contentBase64: { type: 'string' },
  },
};

export const validators = {
  request: schemaCheck<{ registration: { action: string }; signature: `0x${string}` }>(requestSchema),
  upsert: schemaCheck<Registration>(upsertSchema),
  delete: schemaCheck<DeleteRegistration>(deleteSchema),
  urlUpstream: schemaCheck<Extract<UpstreamInput, { kind: 'url' }>>(urlUpstreamSchema),
  fileUpstream: schemaCheck<Extract<UpstreamInput, { kind: 'file' }>>(fileUpstreamSchema),
};

/** What a failed pattern means, by field name. */
export const PATTERN_HINTS: Readonly<Record<string, string>> = {
  slug: 'must be 3 to 40 lower-case letters, digits or hyphens, starting and ending with a letter or digit',
  route: 'must be 1 to 63 lower-case letters, digits or hyphens, starting with a letter or digit',
  priceUsd: 'must be a USD amount with exactly 6 fraction digits, e.g. "0.010000"',
  payTo: 'must be a 0x-prefixed 20-byte hex address',
  networks: 'must be a CAIP-2 network id, e.g. "eip155:8453"',
  nonce: 'must be printable ASCII without spaces',
  signature: 'must be a 65-byte hex signature (0x + 130 hex digits)',
};

export function describeSchemaError(errors: ErrorObject[] | null | undefined, prefix: string): string {
  const e = errors?.[0];
  if (!e) return `${prefix || '/'}: invalid`;
  const params = e.params as Record<string, unknown>;
  let path = prefix + e.instancePath;
  if (e.keyword === 'required' && typeof params.missingProperty === 'string') return `${path}/${params.missingProperty}: is required`;
  if (e.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string') return `${path}/${params.additionalProperty}: is not allowed`;
  path ||= '/';
  const field =
    e.instancePath
      .split('/')
      .filter((s) => s !== '' && !/^\d+$/.test(s))
      .pop() ?? '';
  switch (e.keyword) {
    case 'pattern': {
      const hint = PATTERN_HINTS[field];
      if (hint) return `${path}: ${hint}`;
      return `${path}: must not contain control characters`;
    }
    case 'enum':
      return `${path}: must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'const':
      return `${path}: must be ${JSON.stringify(params.allowedValue)}`;
    case 'uniqueItems':
      return `${path}: must not contain duplicates`;
    default:
      return `${path}: ${e.message ?? 'is invalid'}`;
  }
}
