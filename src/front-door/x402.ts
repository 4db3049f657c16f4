/**
 * The x402 door: a credential in `PAYMENT-SIGNATURE` (or the v1 `X-PAYMENT`) that accepts one of the route's offers;
 * the offers in the 402's `PAYMENT-REQUIRED`; the settlement in `PAYMENT-RESPONSE`. The stock buy reads and answers
 * x402 with the same functions.
 */
import { decodePaymentSignatureHeader } from '../protocol/x402/headers.ts';
import { selectRequirement } from '../protocol/x402/select.ts';
import type { PaymentPayload, PaymentRequirements, VerifyRequest } from '../protocol/x402/types.ts';
import { refusal, type Err, type HttpFailure, type Ok } from '../protocol/result.ts';
import type { Door, PaidCredential, Reading } from './door.ts';
import { paymentRequired, paymentRequiredHeader, paymentResponseHeader } from './x402-answer.ts';

/** The x402 credential a request carries: `PAYMENT-SIGNATURE`, or the v1 name `X-PAYMENT`. */
export function x402CredentialHeader(headers: Readonly<Record<string, string>>): string | undefined {
  return headers['payment-signature'] ?? headers['x-payment'];
}

/** An x402 credential header decoded; a malformed one is refused 400 with the decoder's reason. */
export function decodeX402Credential(header: string): Ok<PaymentPayload> | Err<HttpFailure<'malformed-credential'>> {
  const decoded = decodePaymentSignatureHeader(header);
  return decoded.ok ? decoded : refusal('malformed-credential', `PAYMENT-SIGNATURE: ${decoded.error.message}`, 400);
}

/** The verify request of a payment against the offers it may accept: the offer it accepts, or undefined when none. */
export function acceptedRequest(offers: readonly PaymentRequirements[], payment: PaymentPayload): VerifyRequest | undefined {
  const offer = selectRequirement(offers, payment.accepted);
  return offer ? { x402Version: 2, paymentPayload: payment, paymentRequirements: offer } : undefined;
}

export interface X402Credential extends PaidCredential {
  readonly protocol: 'x402';
}

/** The x402 door of resources under `baseUrl`. */
export function x402Door(opts: { baseUrl: string }): Door<X402Credential> {
  return {
    protocol: 'x402',
    invitation: 'x402 (PAYMENT-SIGNATURE)',
    identifiesPayments: true,
    read(request, terms): Reading<X402Credential> {
      const header = x402CredentialHeader(request.headers);
      if (header === undefined) return { kind: 'none' };
      const decoded = decodeX402Credential(header);
      if (!decoded.ok) return { kind: 'refused', refusal: { protocol: 'x402', status: 400, problem: 'malformed-credential', detail: decoded.error.message } };
      const accepted = acceptedRequest(terms.offers, decoded.value);
      if (!accepted) {
        const detail = 'the payment does not accept any offer of this route (amount, asset, network or recipient differ)';
        return { kind: 'refused', refusal: { protocol: 'x402', status: 402, problem: 'payment-insufficient', detail } };
      }
      return { kind: 'credential', credential: { protocol: 'x402', request: accepted } };
    },
    challenge(terms, ctx) {
      const resource = { url: `${opts.baseUrl}${ctx.path}`, description: terms.summary, mimeType: 'application/json' };
      return { headers: paymentRequiredHeader(paymentRequired(resource, terms.offers, ctx.error, terms.extensions[ctx.method])) };
    },
    receipt: async (settlement) => paymentResponseHeader(settlement),
    settlementRefused: (settlement) => paymentResponseHeader(settlement),
  };
}
