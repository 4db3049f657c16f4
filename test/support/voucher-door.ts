/**
 * A third way to pay, in one file: the "voucher" door. A voucher is an x402 payment (the same EIP-3009 authorization)
 * sent as base64url JSON in a `Voucher` header; the 402 offers it in `Voucher-Offer`; a settled voucher is answered
 * with `Voucher-Receipt`. It exists to show that a new protocol is a door and nothing else: the paid route, the 402
 * composer and the settlement port do not change for it. Tests only.
 */
import type { Door, PaidCredential } from '../../src/front-door/door.ts';
import { acceptedRequest } from '../../src/front-door/x402.ts';
import type { PaymentPayload } from '../../src/protocol/x402/types.ts';

export const VOUCHER_HEADER = 'voucher';

type Voucher = PaidCredential & { protocol: 'voucher' };

export function voucherDoor(): Door<Voucher> {
  return {
    protocol: 'voucher',
    invitation: 'a voucher (Voucher)',
    identifiesPayments: false,
    read(asked, terms) {
      const header = asked.headers[VOUCHER_HEADER];
      if (header === undefined) return { kind: 'none' };
      let payment: PaymentPayload;
      try {
        payment = JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as PaymentPayload;
      } catch {
        return { kind: 'refused', refusal: { protocol: 'voucher', status: 400, problem: 'malformed-credential', detail: 'Voucher: not base64url JSON' } };
      }
      const request = typeof payment === 'object' && payment !== null && 'accepted' in payment ? acceptedRequest(terms.offers, payment) : undefined;
      if (!request) return { kind: 'refused', refusal: { protocol: 'voucher', status: 402, problem: 'payment-insufficient', detail: 'the voucher pays for no offer of this route' } };
      return { kind: 'credential', credential: { protocol: 'voucher', request } };
    },
    challenge(terms) {
      const offer = terms.offers[0];
      return offer ? { headers: { 'Voucher-Offer': `${offer.network} ${offer.amount} ${offer.asset} ${offer.payTo}` } } : undefined;
    },
    receipt: async (settlement): Promise<Record<string, string>> => (settlement.success ? { 'Voucher-Receipt': settlement.transaction } : {}),
  };
}

/** A voucher for `payment`. */
export function voucherFor(payment: PaymentPayload): string {
  return Buffer.from(JSON.stringify(payment), 'utf8').toString('base64url');
}
