/**
 * The payment-channel door: x402's `batch-settlement` scheme. Its credential is an x402 `PAYMENT-SIGNATURE` whose
 * `accepted` names the scheme, carrying a `deposit`, `voucher` or `refund` payload (`schemes/batch-settlement/
 * payload.ts`). It reads and checks what needs no state (the payload's shape, the offer it accepts, the channel
 * config's binding to that offer); the channel's state is the paid route's (`gateway/paywall/channel-paid.ts`).
 *
 * Its offers travel in the same `PAYMENT-REQUIRED` as the `exact` ones (the route's terms list them after them), so
 * it adds no header to a 402: a corrective 402 is the x402 door's, made from terms whose channel offer carries the
 * channel's state (`correctiveTerms`). Its receipt is the `PAYMENT-RESPONSE` the official client reads:
 * `extra.chargedAmount` and `extra.channelState.chargedCumulativeAmount`.
 */
import type { Hex } from 'viem';
import { chainIdOf } from '../chain/canonical.ts';
import { MAX_HEADER_BYTES, decodeBase64Json } from '../protocol/x402/codec.ts';
import { encodePaymentResponseHeader, PAYMENT_RESPONSE_HEADER } from '../protocol/x402/headers.ts';
import type { PaymentPayload, PaymentRequirements, SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import { checkChannelBinding, checkOfferEnvelope } from '../schemes/batch-settlement/binding.ts';
import { BATCH_SETTLEMENT_SCHEME } from '../schemes/batch-settlement/domain.ts';
import { parseBatchPayload, type BatchPayload } from '../schemes/batch-settlement/payload.ts';
import { BatchReason } from '../verify/batch-settlement-reasons.ts';
import { correctiveRequirements, sameOffer, type BatchSettlementRequirements, type ChannelStateExtra, type VoucherStateExtra } from '../schemes/batch-settlement/requirements.ts';
import type { Door, DoorRefusal, PaidCredential, Reading, RouteTerms } from './door.ts';
import { x402CredentialHeader } from './x402.ts';

export const CHANNEL_PROTOCOL = 'batch-settlement';

export interface ChannelCredential extends PaidCredential {
  readonly protocol: typeof CHANNEL_PROTOCOL;
  /** The payment as the settlement port takes it (a deposit is verified and settled through it). */
  readonly request: VerifyRequest;
  readonly payload: BatchPayload;
  /** The route's channel offer it accepts (the server's copy). */
  readonly offer: BatchSettlementRequirements;
  readonly chainId: number;
  readonly channelId: Hex;
}

/** What a channel payment is logged and counted under: its channel and cumulative amount. */
export function channelKeyOf(c: ChannelCredential): string {
  return `channel:${c.channelId}:${c.payload.voucher.maxClaimableAmount}`;
}

/** The route's channel offers (those of the `batch-settlement` scheme). */
export function channelOffers(terms: Pick<RouteTerms, 'offers'>): BatchSettlementRequirements[] {
  return (terms.offers as unknown as Array<{ scheme: string }>).filter((o) => o.scheme === BATCH_SETTLEMENT_SCHEME) as unknown as BatchSettlementRequirements[];
}

/**
 * The route's terms with the offer of the credential's network carrying the channel's state: what a corrective 402 is
 * made from. The corrected offer goes first among the channel offers: the official client recovers from the FIRST
 * `batch-settlement` entry of `accepts`, whatever its network.
 */
export function correctiveTerms(terms: RouteTerms, offer: BatchSettlementRequirements, channelState: ChannelStateExtra, voucherState: VoucherStateExtra | undefined): RouteTerms {
  const corrected = correctiveRequirements(offer, channelState, voucherState) as unknown as PaymentRequirements;
  const isChannel = (o: PaymentRequirements) => (o.scheme as string) === BATCH_SETTLEMENT_SCHEME;
  const others = terms.offers.filter((o) => !isChannel(o) || o.network !== offer.network);
  const at = others.findIndex(isChannel);
  const offers = at === -1 ? [...others, corrected] : [...others.slice(0, at), corrected, ...others.slice(at)];
  return { ...terms, offers };
}

const refused = (status: 400 | 402, detail: string): Reading<ChannelCredential> => ({
  kind: 'refused',
  refusal: { protocol: CHANNEL_PROTOCOL, status, problem: status === 400 ? 'malformed-credential' : 'verification-failed', detail } satisfies DoorRefusal,
});

/** The envelope of a decoded `PAYMENT-SIGNATURE`, when it names this scheme. */
function channelEnvelope(value: unknown): { accepted: Record<string, unknown>; payload: unknown; x402Version: unknown } | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const accepted = (value as { accepted?: unknown }).accepted;
  if (typeof accepted !== 'object' || accepted === null || (accepted as { scheme?: unknown }).scheme !== BATCH_SETTLEMENT_SCHEME) return undefined;
  return value as { accepted: Record<string, unknown>; payload: unknown; x402Version: unknown };
}

/** The door of payment channels; `enabled` false reads nothing (no route offers the scheme). */
export function channelDoor(): Door<ChannelCredential> {
  return {
    protocol: CHANNEL_PROTOCOL,
    invitation: 'an x402 batch-settlement voucher (PAYMENT-SIGNATURE)',
    identifiesPayments: false,
    read(request, terms): Reading<ChannelCredential> {
      const header = x402CredentialHeader(request.headers);
      if (header === undefined) return { kind: 'none' };
      const offers = channelOffers(terms);
      // Most credentials are `exact`: they are the x402 door's, read there (a malformed one included).
      const decoded = decodeBase64Json(header, MAX_HEADER_BYTES, 'either');
      if (!decoded.ok) return { kind: 'none' };
      const envelope = channelEnvelope(decoded.value);
      if (!envelope) return { kind: 'none' };
      if (envelope.x402Version !== 2) return refused(400, 'PAYMENT-SIGNATURE: x402Version must be 2');
      const offer = offers.find((o) => o.network === envelope.accepted.network);
      if (!offer) return refused(402, `${BatchReason.scheme}: this route takes no batch-settlement payment on ${String(envelope.accepted.network).slice(0, 64)}`);
      const envelopeOk = checkOfferEnvelope(offer, envelope.accepted as { scheme: string; network: string });
      if (!envelopeOk.ok) return refused(402, envelopeOk.error.code);
      if (!sameOffer(offer, envelope.accepted as unknown as BatchSettlementRequirements)) {
        return refused(402, `${BatchReason.scheme}: the payment does not accept this route's batch-settlement offer (amount, asset, recipient, receiverAuthorizer or withdrawDelay differ)`);
      }
      const parsed = parseBatchPayload(envelope.payload);
      if (!parsed.ok) return refused(402, parsed.error.code);
      const payload = parsed.value;
      const bound = checkChannelBinding(payload.config, payload.voucher.channelId, offer);
      if (!bound.ok) return refused(402, bound.error.code);
      const verify = { x402Version: 2, paymentPayload: decoded.value as PaymentPayload, paymentRequirements: offer as unknown as PaymentRequirements } satisfies VerifyRequest;
      return { kind: 'credential', credential: { protocol: CHANNEL_PROTOCOL, request: verify, payload, offer, chainId: chainIdOf(offer.network), channelId: payload.voucher.channelId } };
    },
    // Its offers are in the x402 door's PAYMENT-REQUIRED: nothing of its own in a 402.
    challenge: () => undefined,
    receipt: async (settlement) => ({ [PAYMENT_RESPONSE_HEADER]: encodePaymentResponseHeader(settlement) }),
    settlementRefused: (settlement) => ({ [PAYMENT_RESPONSE_HEADER]: encodePaymentResponseHeader(settlement) }),
  };
}

/** The settle answer of an accepted voucher (no transaction: it is claimed later), as the official client reads it. */
export function voucherSettlement(o: { network: string; payer: string; price: bigint; channelState: ChannelStateExtra; transaction?: string }): SettleResponse {
  return {
    success: true,
    transaction: o.transaction ?? '',
    network: o.network as SettleResponse['network'],
    payer: o.payer.toLowerCase(),
    amount: '',
    extra: { channelState: o.channelState, chargedAmount: o.price.toString() },
  };
}
