import { CAIP2 } from '../../chain/canonical.ts';
import type { Network, NetworkRegistry } from '../../chain/networks.ts';
import { chargeRequest } from '../../protocol/mpp/challenge.ts';
import type { ChargeRequest } from '../../protocol/mpp/types.ts';
import type { PaymentRequirements } from '../../protocol/x402/types.ts';
import { eip3009Scheme } from '../../schemes/eip3009/scheme.ts';
import { permit2Scheme } from '../../schemes/permit2/scheme.ts';
import { amountAtomic, type Merchant, type MerchantRoute } from '../catalog/merchant.ts';
import { channelOffersFor, type ChannelOfferTerms } from './channel-offers.ts';

/** A buyer's signature must stay valid this long: the spec's 300-second window for the stock chain's permits. */
export const MAX_TIMEOUT_SECONDS = 300;

/**
 * The x402 offers of one paid route: Permit2 with stablecoin B on the stock chain (the spec's listed settlement),
 * then EIP-3009 on each other network the merchant accepts, in the order of the merchant's list.
 */
export function offersFor(merchant: Merchant, route: MerchantRoute, networks: NetworkRegistry, channels?: ChannelOfferTerms): PaymentRequirements[] {
  const amount = amountAtomic(route).toString();
  const offers: PaymentRequirements[] = [];
  const ordered = [...merchant.networks].sort((a, b) => (a === CAIP2.stockChain ? -1 : b === CAIP2.stockChain ? 1 : 0));
  for (const caip2 of ordered) {
    const n = networks.find(caip2);
    if (!n) continue;
    offers.push(offerOn(n, merchant.payTo, amount));
  }
  // Payment channels, when the route takes them: after every `exact` offer.
  offers.push(...channelOffersFor(merchant, route, networks, channels));
  return offers;
}

function offerOn(n: Network, payTo: `0x${string}`, amount: string): PaymentRequirements {
  const base = { scheme: 'exact' as const, network: n.caip2 as `eip155:${string}`, amount, asset: n.stablecoin.address, payTo, maxTimeoutSeconds: MAX_TIMEOUT_SECONDS };
  const permit2 = n.caip2 === CAIP2.stockChain ? permit2Scheme.requirementsExtra(n) : undefined;
  return { ...base, extra: permit2 ?? eip3009Scheme.requirementsExtra(n) ?? {} };
}

/** The MPP network: the stock chain's stablecoin B, paid by EIP-3009 authorization, when the merchant accepts it. */
export function mppNetworkFor(merchant: Merchant, networks: NetworkRegistry): Network | undefined {
  const preferred = merchant.networks.includes(CAIP2.stockChain) ? CAIP2.stockChain : merchant.networks[0];
  return preferred ? networks.find(preferred) : undefined;
}

export function mppRequestFor(merchant: Merchant, route: MerchantRoute, n: Network): ChargeRequest {
  return chargeRequest({ amount: amountAtomic(route), currency: n.stablecoin.address, recipient: merchant.payTo, chainId: n.chainId, decimals: n.stablecoin.decimals });
}

/** The x402 requirements an MPP credential settles under: EIP-3009 on the challenge's network. */
export function mppRequirements(request: ChargeRequest, n: Network): PaymentRequirements {
  return {
    scheme: 'exact',
    network: n.caip2 as `eip155:${string}`,
    amount: request.amount,
    asset: request.currency,
    payTo: request.recipient,
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    extra: { name: n.stablecoin.name, version: n.stablecoin.version },
  };
}
