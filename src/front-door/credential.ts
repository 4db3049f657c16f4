/**
 * The front door of everything sold for a 402 (the marketplace's paid routes and the stock buy): what a request's
 * payment headers amount to. Pure: keys, clock and the route's terms come in as arguments.
 */
import type { Network } from '../chain/networks.ts';
import { decodeRequest, verifyChallenge } from '../protocol/mpp/challenge.ts';
import { boundMethod, opaqueIsFor } from '../protocol/mpp/binding.ts';
import { expectedAuthorizationNonce, parseAuthorizationPayment, sourceMatches } from '../protocol/mpp/credential.ts';
import type { ChargeRequest, PaymentChallenge, ProblemCode } from '../protocol/mpp/types.ts';
import { decodePaymentSignatureHeader } from '../protocol/x402/headers.ts';
import { selectRequirement } from '../protocol/x402/select.ts';
import type { PaymentPayload, PaymentRequirements, VerifyRequest } from '../protocol/x402/types.ts';
import { refusal, type Err, type HttpFailure, type Ok } from '../protocol/result.ts';

/** What a request's payment headers amount to. Pure: keys, clock and the route's terms come in as arguments. */
export type Credential =
  | { kind: 'none' }
  | { kind: 'x402'; request: VerifyRequest }
  | { kind: 'mpp'; request: VerifyRequest; challenge: PaymentChallenge; chainId: number }
  | { kind: 'invalid'; protocol: 'x402' | 'mpp'; status: 400 | 402; problem: ProblemCode; detail: string; challengeId?: string };

export interface RouteTerms {
  /** The x402 offers this route advertises. */
  offers: PaymentRequirements[];
  /**
   * The MPP charge this route asks for, and its network; `routeTags` holds the route tag (see `binding.ts`) of each
   * method the route serves, which a challenge's `opaque` must start with.
   */
  mpp?: { request: ChargeRequest; network: Network; requirements: PaymentRequirements; routeTags: Readonly<Record<string, string>> };
  mppKey: Uint8Array;
  nowMs: number;
}

const sameAddress = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/**
 * `method` is the request's HTTP method: an MPP challenge is bound to it. The body is not read here: an MPP
 * credential's `digest` is checked against it later (`bodyMismatch` in `binding.ts`), still before settlement.
 */
export function readCredential(headers: Record<string, string>, terms: RouteTerms, method: string): Credential {
  const x402 = x402CredentialHeader(headers);
  if (x402 !== undefined) return readX402(x402, terms);
  const auth = headers.authorization;
  if (auth !== undefined && /^payment\s/i.test(auth)) return readMpp(auth, terms, method);
  return { kind: 'none' };
}

/** The x402 credential a request carries: `PAYMENT-SIGNATURE`, or the v1 name `X-PAYMENT`. */
export function x402CredentialHeader(headers: Record<string, string>): string | undefined {
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

function readX402(header: string, terms: RouteTerms): Credential {
  const decoded = decodeX402Credential(header);
  if (!decoded.ok) return { kind: 'invalid', protocol: 'x402', status: 400, problem: 'malformed-credential', detail: decoded.error.message };
  const request = acceptedRequest(terms.offers, decoded.value);
  if (!request)
    return {
      kind: 'invalid',
      protocol: 'x402',
      status: 402,
      problem: 'payment-insufficient',
      detail: 'the payment does not accept any offer of this route (amount, asset, network or recipient differ)',
    };
  return { kind: 'x402', request };
}

function readMpp(header: string, terms: RouteTerms, method: string): Credential {
  const parsed = parseAuthorizationPayment(header);
  if (!parsed.ok) {
    // A well-formed credential for a method or intent we do not serve is a 400, not a malformed one.
    if (parsed.error.code === 'unsupported_method') return { kind: 'invalid', protocol: 'mpp', status: 400, problem: 'method-unsupported', detail: parsed.error.message };
    return { kind: 'invalid', protocol: 'mpp', status: 402, problem: 'malformed-credential', detail: parsed.error.message };
  }
  const credential = parsed.value;
  const challenge = credential.challenge;
  if (challenge.method !== 'evm' || challenge.intent !== 'charge') {
    return { kind: 'invalid', protocol: 'mpp', status: 400, problem: 'method-unsupported', detail: `method ${challenge.method}/${challenge.intent} is not served`, challengeId: challenge.id };
  }
  const verdict = verifyChallenge(terms.mppKey, challenge, terms.nowMs);
  if (!verdict.ok) return { kind: 'invalid', protocol: 'mpp', status: 402, problem: verdict.error.code, detail: verdict.error.message, challengeId: challenge.id };
  if (!terms.mpp) return { kind: 'invalid', protocol: 'mpp', status: 402, problem: 'invalid-challenge', detail: 'this route takes no MPP payment', challengeId: challenge.id };
  const echoed = decodeRequest(challenge.request);
  if (!echoed.ok) return { kind: 'invalid', protocol: 'mpp', status: 402, problem: 'invalid-challenge', detail: echoed.error.message, challengeId: challenge.id };
  // A challenge issued for a cheaper route (or another merchant) must not pay for this one.
  const want = terms.mpp.request;
  const r = echoed.value;
  if (r.amount !== want.amount || !sameAddress(r.currency, want.currency) || !sameAddress(r.recipient, want.recipient) || r.methodDetails.chainId !== want.methodDetails.chainId) {
    return { kind: 'invalid', protocol: 'mpp', status: 402, problem: 'invalid-challenge', detail: 'the challenge was issued for other terms than this route', challengeId: challenge.id };
  }
  // Nor may a challenge issued for another route of the same price and recipient, or for another method.
  const tag = terms.mpp.routeTags[boundMethod(method)];
  if (tag === undefined || !opaqueIsFor(challenge.opaque, tag)) {
    return { kind: 'invalid', protocol: 'mpp', status: 402, problem: 'invalid-challenge', detail: `the challenge was not issued for ${boundMethod(method)} on this route`, challengeId: challenge.id };
  }
  const p = credential.payload;
  if (p.nonce.toLowerCase() !== expectedAuthorizationNonce(challenge.id, challenge.realm).toLowerCase()) {
    return { kind: 'invalid', protocol: 'mpp', status: 402, problem: 'verification-failed', detail: 'the authorization nonce is not bound to this challenge', challengeId: challenge.id };
  }
  // The payer the credential names must be the one who signed: `from` on the challenge's chain.
  if (credential.source !== undefined && !sourceMatches(credential.source, terms.mpp.network.chainId, p.from)) {
    return {
      kind: 'invalid',
      protocol: 'mpp',
      status: 402,
      problem: 'verification-failed',
      detail: `source ${credential.source} is not the authorization's signer on chain ${terms.mpp.network.chainId}`,
      challengeId: challenge.id,
    };
  }
  const requirements = terms.mpp.requirements;
  return {
    kind: 'mpp',
    challenge,
    chainId: terms.mpp.network.chainId,
    request: {
      x402Version: 2,
      paymentRequirements: requirements,
      paymentPayload: {
        x402Version: 2,
        accepted: requirements,
        payload: { signature: p.signature, authorization: { from: p.from, to: p.to, value: p.value, validAfter: p.validAfter, validBefore: p.validBefore, nonce: p.nonce } },
      },
    },
  };
}
