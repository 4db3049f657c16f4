/**
 * What the x402 extensions of a 402 describe: one paid resource, called with one method. The gateway fills it from
 * a merchant's route; the extensions (`index.ts`) turn it into the 402's `extensions` object. Plain data, no I/O.
 */

/** A JSON Schema (draft 2020-12), as plain data. */
export type Schema = { [keyword: string]: unknown };

export interface PaidResourceDescription {
  method: 'GET' | 'POST';
  /** Named query parameters: each one's schema (with its description), whether it is required, and an example. */
  query: Array<{ name: string; description: string; required: boolean; schema: Schema; example?: unknown }>;
  /** Query keys beyond the named ones are forwarded too. */
  freeFormQuery: boolean;
  /** POST: the JSON body's schema and an example body that satisfies it. */
  body?: { schema: Schema; example: Record<string, unknown> };
  /** What a 200 carries: JSON (an object or a bare number) or a file of a content type. */
  output: { type: 'json'; format: 'object' | 'number' } | { type: 'file'; format: string };
  /**
   * The resource honours `payment-identifier` ids (idempotency keys), and whether it requires one. Absent: it does not
   * (the stock buy), and its 402 does not declare the extension.
   */
  paymentIdentifier?: { required: boolean };
}
