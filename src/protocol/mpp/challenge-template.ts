/**
 * MPP challenges made from a template: what the challenges of one route share within one `expires` second is worked
 * out once, and each challenge costs no HMAC of its own (a salted id; see {@link issueFromTemplate}).
 */
import { createHmac } from 'node:crypto';
import { ok, type Result } from '../x402/codec.ts';
import { challengeIdInput, createChallenge, type CreateChallengeParams } from './challenge.ts';
import { PAYMENT_SCHEME, type PaymentChallenge } from './types.ts';
import { authParam, formatWwwAuthenticate } from './www-authenticate.ts';

/**
 * What the challenges of one route share within one `expires` second, worked out once: the HMAC input up to the
 * `digest` slot and the header text between `id` and `digest`. {@link issueFromTemplate} then adds what differs per
 * challenge (its `digest` and `opaque`) for the cost of one HMAC and a few concatenations.
 */
export interface ChallengeTemplate {
  readonly fields: Omit<PaymentChallenge, 'id' | 'digest' | 'opaque'>;
  /** `realm|method|intent|request|expires|` */
  readonly idInputHead: string;
  /** `, realm="…", method="…", intent="…", request="…", expires="…"[, description="…"]` */
  readonly headerMiddle: string;
}

export function challengeTemplate(params: Omit<CreateChallengeParams, 'digest' | 'opaque'>): Result<ChallengeTemplate> {
  const made = createChallenge(new Uint8Array(0), params);
  if (!made.ok) return made;
  const { id: _id, ...fields } = made.value;
  const head = formatWwwAuthenticate({ ...made.value, id: '' });
  return ok({
    fields,
    idInputHead: challengeIdInput({ ...fields, digest: '', opaque: '' }).slice(0, -1),
    headerMiddle: head.slice(`${PAYMENT_SCHEME} id=""`.length),
  });
}

/**
 * The HMAC part of a salted challenge id: the id of the template's challenge with this `digest` and `opaque` set to
 * `opaqueHead` (the part of `opaque` before the salt). The same for every challenge of one template, digest and head,
 * so a caller may keep it for as long as the template lives.
 */
export function templateMac(key: Uint8Array, template: ChallengeTemplate, digest: string | undefined, opaqueHead: string): string {
  return createHmac('sha256', key)
    .update(`${template.idInputHead}${digest ?? ''}|${opaqueHead}`, 'utf8')
    .digest('base64url');
}

/**
 * One challenge from a template, salted: `opaque` is `opaqueHead` then `salt`, and the id is `mac` (from
 * {@link templateMac}) then the same salt. Every slot but the salt is under the HMAC; the salt only makes each
 * challenge (and so each EIP-3009 nonce, keccak256(id + realm)) distinct, and choosing it gains nothing, since every
 * challenge still needs its own payment. So a challenge costs no HMAC of its own. Returns the id and the
 * `WWW-Authenticate` value (as {@link formatWwwAuthenticate} writes it).
 */
export function issueFromTemplate(template: ChallengeTemplate, mac: string, binding: { digest?: string; opaqueHead: string; salt: string }): { id: string; header: string } {
  const id = `${mac}${binding.salt}`;
  let header = `${PAYMENT_SCHEME} id="${id}"${template.headerMiddle}`;
  if (binding.digest !== undefined) header += `, ${authParam('digest', binding.digest)}`;
  header += `, ${authParam('opaque', `${binding.opaqueHead}${binding.salt}`)}`;
  return { id, header };
}

/**
 * The fixed parts of the `WWW-Authenticate` value of a salted challenge without a digest, around its two fillers: the
 * id, then `opaque` (both base64url, so written unescaped): as {@link issueFromTemplate} writes it.
 */
export function saltedHeaderParts(template: ChallengeTemplate): [string, string, string] {
  return [`${PAYMENT_SCHEME} id="`, `"${template.headerMiddle}, opaque="`, '"'];
}
