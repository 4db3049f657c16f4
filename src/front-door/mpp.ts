/**
 * The MPP door: an `Authorization: Payment` credential answering a challenge this gateway issued for this route,
 * method and body, paid by an EIP-3009 authorization bound to the challenge; a fresh challenge in each 402's
 * `WWW-Authenticate`; a signed `Payment-Receipt` once settled.
 *
 * A challenge's fields change only with the route's terms and the `expires` second, but for its `digest` and
 * `opaque` (hence its id): so a route's challenge template is made once per second, and each 402 costs one HMAC
 * (none more for a body-less request: the header is filled into a template the server checked once).
 */
import type { Hex } from 'viem';
import { fillHeader, headerTemplate, type HeaderTemplate } from '../http/header-template.ts';
import { bodyMismatch, boundMethod, opaqueIsFor, saltSource } from '../protocol/mpp/binding.ts';
import { decodeRequest, verifyChallenge } from '../protocol/mpp/challenge.ts';
import { challengeTemplate, issueFromTemplate, saltedHeaderParts, templateMac, type ChallengeTemplate } from '../protocol/mpp/challenge-template.ts';
import { expectedAuthorizationNonce, parseAuthorizationPayment, sourceMatches } from '../protocol/mpp/credential.ts';
import { encodeReceipt, signReceipt } from '../protocol/mpp/receipt.ts';
import type { PaymentChallenge } from '../protocol/mpp/types.ts';
import type { Door, DoorRefusal, IssuedChallenge, PaidCredential, Reading, RouteTerms } from './door.ts';
import { SecondMemo } from './second-memo.ts';

export interface MppCredential extends PaidCredential {
  readonly protocol: 'mpp';
  readonly challenge: PaymentChallenge;
  readonly chainId: number;
}

export interface MppDoorOptions {
  /** The HMAC key of challenge ids. */
  key: Uint8Array;
  realm: string;
  /** Signs the `Payment-Receipt`. */
  receiptKey: Hex;
  /** The clock challenges are checked by and receipts dated with. */
  now(): number;
}

/** How the challenges of one route and method are made within one `expires` second (see `binding.ts`). */
interface Issuer {
  template: ChallengeTemplate;
  /** The route tag `opaque` starts with. */
  tag: string;
  /** The HMAC of this second's challenges without a body digest, made on first use. */
  mac?: string;
  /** Their `WWW-Authenticate` value around the id and `opaque`, checked once, on first use. */
  header?: HeaderTemplate;
}

const sameAddress = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

export function mppDoor(opts: MppDoorOptions): Door<MppCredential> {
  const issuers = new SecondMemo<Issuer | undefined>();
  /** Randomness for every challenge's `opaque`: two 402s never share a challenge id, nor two payments a nonce. */
  const nextSalt = saltSource();
  /** A fresh challenge: the template with this request's body digest and a new salt (in `opaque` and the id). */
  const issue = (issuer: Issuer, digest: string | undefined): IssuedChallenge => {
    const salt = nextSalt();
    if (digest !== undefined) {
      const made = issueFromTemplate(issuer.template, templateMac(opts.key, issuer.template, digest, issuer.tag), { digest, opaqueHead: issuer.tag, salt });
      return { name: 'WWW-Authenticate', value: made.header, challengeId: made.id };
    }
    issuer.mac ??= templateMac(opts.key, issuer.template, undefined, issuer.tag);
    const id = `${issuer.mac}${salt}`;
    issuer.header ??= headerTemplate(saltedHeaderParts(issuer.template));
    return { name: 'WWW-Authenticate', value: fillHeader(issuer.header, [id, `${issuer.tag}${salt}`]), challengeId: id };
  };
  return {
    protocol: 'mpp',
    invitation: 'MPP (Authorization: Payment)',
    identifiesPayments: false,
    read(request, terms) {
      const auth = request.headers.authorization;
      if (auth === undefined || !/^payment\s/i.test(auth)) return { kind: 'none' };
      return readMpp(opts.key, auth, terms, request.method, opts.now());
    },
    challenge(terms, ctx) {
      const mpp = terms.mpp;
      if (!mpp) return undefined;
      const issuer = issuers.get(ctx.expiresSecond, `${terms.key}|${ctx.method}`, () => {
        const tag = mpp.routeTags[ctx.method];
        const template = challengeTemplate({ realm: opts.realm, request: mpp.request, expires: new Date(ctx.expiresSecond * 1000), description: terms.title });
        return tag !== undefined && template.ok ? { template: template.value, tag } : undefined;
      });
      return issuer ? { headers: {}, issue: (digest) => issue(issuer, digest) } : undefined;
    },
    unbound: (credential, digest) => bodyMismatch(credential.challenge.digest, digest),
    async receipt(settlement, credential): Promise<Record<string, string>> {
      if (!settlement.success) return {};
      const fields = {
        status: 'success' as const,
        method: 'evm' as const,
        reference: settlement.transaction as Hex,
        timestamp: new Date(opts.now()).toISOString(),
        challengeId: credential.challenge.id,
        chainId: credential.chainId,
      };
      const signed = await signReceipt(fields, opts.receiptKey);
      if (!signed.ok) return {};
      const encoded = encodeReceipt(signed.value);
      return encoded.ok ? { 'Payment-Receipt': encoded.value } : {};
    },
  };
}

/**
 * `method` is the request's HTTP method: a challenge is bound to it. The body is not read here: a credential's
 * `digest` is checked against it later (`unbound`), still before settlement.
 */
function readMpp(key: Uint8Array, header: string, terms: RouteTerms, method: string, nowMs: number): Reading<MppCredential> {
  const refused = (r: Omit<DoorRefusal, 'protocol'>): Reading<MppCredential> => ({ kind: 'refused', refusal: { protocol: 'mpp', ...r } });
  const parsed = parseAuthorizationPayment(header);
  if (!parsed.ok) {
    // A well-formed credential for a method or intent we do not serve is a 400, not a malformed one.
    if (parsed.error.code === 'unsupported_method') return refused({ status: 400, problem: 'method-unsupported', detail: parsed.error.message });
    return refused({ status: 402, problem: 'malformed-credential', detail: parsed.error.message });
  }
  const credential = parsed.value;
  const challenge = credential.challenge;
  const challengeId = challenge.id;
  if (challenge.method !== 'evm' || challenge.intent !== 'charge') {
    return refused({ status: 400, problem: 'method-unsupported', detail: `method ${challenge.method}/${challenge.intent} is not served`, challengeId });
  }
  const verdict = verifyChallenge(key, challenge, nowMs);
  if (!verdict.ok) return refused({ status: 402, problem: verdict.error.code, detail: verdict.error.message, challengeId });
  if (!terms.mpp) return refused({ status: 402, problem: 'invalid-challenge', detail: 'this route takes no MPP payment', challengeId });
  const echoed = decodeRequest(challenge.request);
  if (!echoed.ok) return refused({ status: 402, problem: 'invalid-challenge', detail: echoed.error.message, challengeId });
  // A challenge issued for a cheaper route (or another merchant) must not pay for this one.
  const want = terms.mpp.request;
  const r = echoed.value;
  if (r.amount !== want.amount || !sameAddress(r.currency, want.currency) || !sameAddress(r.recipient, want.recipient) || r.methodDetails.chainId !== want.methodDetails.chainId) {
    return refused({ status: 402, problem: 'invalid-challenge', detail: 'the challenge was issued for other terms than this route', challengeId });
  }
  // Nor may a challenge issued for another route of the same price and recipient, or for another method.
  const tag = terms.mpp.routeTags[boundMethod(method)];
  if (tag === undefined || !opaqueIsFor(challenge.opaque, tag)) {
    return refused({ status: 402, problem: 'invalid-challenge', detail: `the challenge was not issued for ${boundMethod(method)} on this route`, challengeId });
  }
  const p = credential.payload;
  if (p.nonce.toLowerCase() !== expectedAuthorizationNonce(challenge.id, challenge.realm).toLowerCase()) {
    return refused({ status: 402, problem: 'verification-failed', detail: 'the authorization nonce is not bound to this challenge', challengeId });
  }
  // The payer the credential names must be the one who signed: `from` on the challenge's chain.
  const chainId = terms.mpp.network.chainId;
  if (credential.source !== undefined && !sourceMatches(credential.source, chainId, p.from)) {
    return refused({ status: 402, problem: 'verification-failed', detail: `source ${credential.source} is not the authorization's signer on chain ${chainId}`, challengeId });
  }
  const requirements = terms.mpp.requirements;
  const authorization = { from: p.from, to: p.to, value: p.value, validAfter: p.validAfter, validBefore: p.validBefore, nonce: p.nonce };
  return {
    kind: 'credential',
    credential: {
      protocol: 'mpp',
      challenge,
      chainId,
      request: { x402Version: 2, paymentRequirements: requirements, paymentPayload: { x402Version: 2, accepted: requirements, payload: { signature: p.signature, authorization } } },
    },
  };
}
