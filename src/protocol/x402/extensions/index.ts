/**
 * The x402 extensions gate402 implements: the one list that `/supported` names and that every 402's `extensions`
 * is made from. An extension is a file here; adding one is adding its entry to {@link X402_EXTENSIONS}.
 */
import { BAZAAR_KEY, bazaarDeclaration } from './bazaar.ts';
import { PAYMENT_IDENTIFIER, paymentIdentifierDeclaration } from './payment-identifier.ts';
import type { PaidResourceDescription } from './resource.ts';

export type { PaidResourceDescription } from './resource.ts';

export interface X402Extension {
  /** The key in `/supported.extensions` and in a 402's `extensions`. */
  key: string;
  /** What a 402 for `resource` carries under `key`; undefined: nothing for this resource. */
  declare(resource: PaidResourceDescription): unknown;
}

export const X402_EXTENSIONS: readonly X402Extension[] = [
  { key: BAZAAR_KEY, declare: bazaarDeclaration },
  { key: PAYMENT_IDENTIFIER, declare: (resource) => (resource.paymentIdentifier ? paymentIdentifierDeclaration(resource.paymentIdentifier.required) : undefined) },
];

/** `/supported.extensions`: the keys of the extensions implemented here. */
export function supportedExtensionKeys(): string[] {
  return X402_EXTENSIONS.map((e) => e.key);
}

/** A 402's `extensions` for `resource`: each implemented extension's declaration. */
export function declaredExtensions(resource: PaidResourceDescription): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const e of X402_EXTENSIONS) {
    const value = e.declare(resource);
    if (value !== undefined) out[e.key] = value;
  }
  return out;
}
