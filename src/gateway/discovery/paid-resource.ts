/** A merchant's route and method as the x402 extensions of its 402 describe it (`protocol/x402/extensions`). */
import type { PaidResourceDescription } from '../../protocol/x402/extensions/index.ts';
import type { HttpMethod, Merchant, MerchantRoute, PublicMerchant, RouteParameter } from '../catalog/merchant.ts';

/** A parameter's example as the JSON value its schema describes (the catalog writes every example as text). */
export function exampleValue(param: RouteParameter): unknown {
  const ex = param.example;
  if (ex === undefined) return undefined;
  const type = param.schema.type;
  if (type === 'integer' || type === 'number') return Number(ex);
  if (type === 'boolean') return ex === 'true';
  return ex;
}

/** The first of a JSON Schema's `examples` that is an object, else `{}`. */
function bodyExample(schema: Record<string, unknown>): Record<string, unknown> {
  const first = Array.isArray(schema.examples) ? schema.examples[0] : undefined;
  return typeof first === 'object' && first !== null && !Array.isArray(first) ? (first as Record<string, unknown>) : {};
}

export function paidResourceDescription(merchant: Merchant | PublicMerchant, route: MerchantRoute, method: HttpMethod): PaidResourceDescription {
  const shape = route.shape;
  // Named query parameters belong to GET (and to a route's only method), as in the discovery documents.
  const named = method === 'GET' || route.methods.length === 1 ? (shape?.query ?? []) : [];
  const query = named.map((p) => {
    const example = exampleValue(p);
    return { name: p.name, description: p.description, required: p.required === true, schema: p.schema, ...(example !== undefined ? { example } : {}) };
  });
  const bodySchema = shape?.body?.schema ?? { type: 'object', additionalProperties: true };
  const up = merchant.upstream;
  return {
    method,
    query,
    freeFormQuery: shape === undefined || shape.freeFormQuery === true,
    ...(method === 'POST' ? { body: { schema: bodySchema, example: bodyExample(bodySchema) } } : {}),
    output: up.kind === 'file' ? { type: 'file', format: up.contentType } : { type: 'json', format: shape?.response === 'number' ? 'number' : 'object' },
    // Every paid route honours payment identifiers (the paywall's `paidWithId`).
    paymentIdentifier: { required: route.requirePaymentId === true },
  };
}
