/**
 * The `bazaar` extension (x402 discovery, as `@x402/extensions` 2.27 reads it): a 402 tells a catalog how the
 * resource is called (`info.input`: method, query parameters or JSON body) and what it answers (`info.output`),
 * with a JSON Schema that `info` satisfies, so a bazaar client can list the resource and call it unchanged.
 */
import type { PaidResourceDescription, Schema } from './resource.ts';

export const BAZAAR_KEY = 'bazaar';

export interface BazaarDeclaration {
  info: {
    input:
      | { type: 'http'; method: 'GET'; queryParams: Record<string, unknown> }
      | { type: 'http'; method: 'POST'; bodyType: 'json'; body: Record<string, unknown>; queryParams?: Record<string, unknown> };
    output: { type: string; format: string };
  };
  schema: Schema;
}

const DRAFT_2020_12 = 'https://json-schema.org/draft/2020-12/schema';

function querySchema(r: PaidResourceDescription): Schema {
  const properties = Object.fromEntries(r.query.map((p) => [p.name, { ...p.schema, description: p.description }]));
  const required = r.query.filter((p) => p.required).map((p) => p.name);
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}), additionalProperties: r.freeFormQuery || r.query.length === 0 };
}

/** The example query: every parameter that has an example (so every required one the catalog declares). */
function queryExample(r: PaidResourceDescription): Record<string, unknown> {
  return Object.fromEntries(r.query.filter((p) => p.example !== undefined).map((p) => [p.name, p.example]));
}

/** The `bazaar` entry of a 402's `extensions` for `r`. */
export function bazaarDeclaration(r: PaidResourceDescription): BazaarDeclaration {
  const output = { type: r.output.type, format: r.output.format };
  const outputSchema = { type: 'object', properties: { type: { type: 'string', const: r.output.type }, format: { type: 'string' } }, required: ['type'] };
  if (r.method === 'POST') {
    const body = r.body ?? { schema: { type: 'object', additionalProperties: true }, example: {} };
    return {
      info: { input: { type: 'http', method: 'POST', bodyType: 'json', body: structuredClone(body.example), ...(r.query.length > 0 ? { queryParams: queryExample(r) } : {}) }, output },
      schema: {
        $schema: DRAFT_2020_12,
        type: 'object',
        properties: {
          input: {
            type: 'object',
            properties: {
              type: { type: 'string', const: 'http' },
              method: { type: 'string', enum: ['POST'] },
              bodyType: { type: 'string', enum: ['json'] },
              body: structuredClone(body.schema),
              queryParams: querySchema(r),
            },
            required: ['type', 'method', 'bodyType', 'body'],
            additionalProperties: false,
          },
          output: outputSchema,
        },
        required: ['input'],
      },
    };
  }
  return {
    info: { input: { type: 'http', method: 'GET', queryParams: queryExample(r) }, output },
    schema: {
      $schema: DRAFT_2020_12,
      type: 'object',
      properties: {
        input: {
          type: 'object',
          properties: { type: { type: 'string', const: 'http' }, method: { type: 'string', enum: ['GET'] }, queryParams: querySchema(r) },
          required: ['type', 'method'],
          additionalProperties: false,
        },
        output: outputSchema,
      },
      required: ['input'],
    },
  };
}
