/**
 * The buyer's side of an x402 `exact` payment with Permit2 (protocols.md section 3): the EIP-712
 * `PermitWitnessTransferFrom` a wallet signs with `eth_signTypedData_v4`, and the `PAYMENT-SIGNATURE` header that
 * carries it. The type table is written here from the protocol's type string, as every x402 client has its own.
 */
import type { PaymentPayload, PaymentRequirements, Permit2Authorization, ResourceInfo } from '../../protocol/x402/types.ts';
import { base64Json, randomUint256 } from './bytes.ts';

const PERMIT_WITNESS_TYPES = {
  EIP712Domain: [
    { name: 'name', type: 'string' },
    { name: 'chainId', type: 'uint256' },
    { name: 'verifyingContract', type: 'address' },
  ],
  PermitWitnessTransferFrom: [
    { name: 'permitted', type: 'TokenPermissions' },
    { name: 'spender', type: 'address' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
    { name: 'witness', type: 'Witness' },
  ],
  TokenPermissions: [
    { name: 'token', type: 'address' },
    { name: 'amount', type: 'uint256' },
  ],
  Witness: [
    { name: 'to', type: 'address' },
    { name: 'validAfter', type: 'uint256' },
  ],
};

/** Seconds of the offer's lifetime left unused, so a clock a little ahead of the gateway's still fits its limit. */
const DEADLINE_MARGIN_SECONDS = 30;

export interface PermitToSign {
  authorization: Permit2Authorization;
  /** The `eth_signTypedData_v4` argument. */
  typedData: unknown;
}

/** The permit paying `offer` from `from`: exactly its amount and asset, to its payTo, through its spender. */
export function permitFor(offer: PaymentRequirements, from: `0x${string}`, permit2: `0x${string}`, nowSeconds: number): PermitToSign {
  const spender = offer.extra?.spender;
  if (offer.extra?.assetTransferMethod !== 'permit2' || typeof spender !== 'string') throw new Error('the offer is not a Permit2 payment');
  const chainId = Number(offer.network.slice('eip155:'.length));
  const limit = Math.min(offer.maxTimeoutSeconds, 300);
  const lifetime = limit > 2 * DEADLINE_MARGIN_SECONDS ? limit - DEADLINE_MARGIN_SECONDS : Math.ceil(limit / 2);
  const authorization: Permit2Authorization = {
    from,
    permitted: { token: offer.asset, amount: offer.amount },
    spender: spender as `0x${string}`,
    nonce: randomUint256(),
    deadline: String(nowSeconds + lifetime),
    witness: { to: offer.payTo, validAfter: '0' },
  };
  const { from: _from, ...message } = authorization;
  return {
    authorization,
    typedData: { types: PERMIT_WITNESS_TYPES, primaryType: 'PermitWitnessTransferFrom', domain: { name: 'Permit2', chainId, verifyingContract: permit2 }, message },
  };
}

/** The `PAYMENT-SIGNATURE` value: the offer echoed verbatim (its signed quote included), the permit and its signature. */
export function paymentSignatureHeader(offer: PaymentRequirements, resource: ResourceInfo | undefined, authorization: Permit2Authorization, signature: `0x${string}`): string {
  const payload: PaymentPayload = { x402Version: 2, ...(resource ? { resource } : {}), accepted: offer, payload: { signature, permit2Authorization: authorization } };
  return base64Json(payload);
}
