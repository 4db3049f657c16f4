/**
 * The `batch-settlement` (payment channel) offers of a paid route that accepts them: on Base and Base Sepolia with the
 * EIP-3009 deposit collector, on the stock chain with the Permit2 deposit collector, after the route's `exact` offers
 * (so a client that takes the first offer it can pay still pays `exact`). The receiver authorizer is the gateway's
 * channel key; the withdraw delay is the operator's, within the spec's bounds.
 */
import type { Address } from 'viem';
import { CAIP2 } from '../../chain/canonical.ts';
import type { Network, NetworkRegistry } from '../../chain/networks.ts';
import type { PaymentRequirements } from '../../protocol/x402/types.ts';
import { batchSettlementRequirements, type AssetTransferMethod } from '../../schemes/batch-settlement/requirements.ts';
import { amountAtomic, type Merchant, type MerchantRoute } from '../catalog/merchant.ts';

/** What the gateway offers channels on: its receiver authorizer (address of its channel key) and withdraw delay. */
export interface ChannelOfferTerms {
  receiverAuthorizer: Address;
  withdrawDelay: number;
  /** How long a deposit's authorization must stay valid (the offer's `maxTimeoutSeconds`). */
  maxTimeoutSeconds: number;
}

/** How deposits reach the channel on each network the scheme is offered on. */
const TRANSFER_METHOD: Readonly<Record<string, AssetTransferMethod>> = { [CAIP2.base]: 'eip3009', [CAIP2.baseSepolia]: 'eip3009', [CAIP2.stockChain]: 'permit2' };

/** Whether a route takes payment channels (its merchant's setting). */
export function takesChannels(route: MerchantRoute): boolean {
  return route.batchSettlement === true;
}

/** The route's channel offers, one per network of the merchant's list the scheme runs on; none when the route does not take them. */
export function channelOffersFor(merchant: Merchant, route: MerchantRoute, networks: NetworkRegistry, terms: ChannelOfferTerms | undefined): PaymentRequirements[] {
  if (!terms || !takesChannels(route)) return [];
  const price = amountAtomic(route);
  const out: PaymentRequirements[] = [];
  const ordered = [...merchant.networks].sort((a, b) => (a === CAIP2.stockChain ? -1 : b === CAIP2.stockChain ? 1 : 0));
  for (const caip2 of ordered) {
    const method = TRANSFER_METHOD[caip2];
    const n: Network | undefined = networks.find(caip2);
    if (!method || !n) continue;
    const offer = batchSettlementRequirements({
      network: n.caip2 as `eip155:${number}`,
      asset: n.stablecoin.address,
      payTo: merchant.payTo,
      price,
      maxTimeoutSeconds: terms.maxTimeoutSeconds,
      receiverAuthorizer: terms.receiverAuthorizer,
      withdrawDelay: terms.withdrawDelay,
      tokenName: n.stablecoin.name,
      tokenVersion: n.stablecoin.version,
      assetTransferMethod: method,
    });
    if (offer.ok) out.push(offer.value as unknown as PaymentRequirements);
  }
  return out;
}
