/**
 * Wire shapes of merchant self-registration (`POST /api/merchants`) and the validated forms the registry works on.
 * The stored model (`Merchant`, `MerchantRoute`, `Upstream`) is `../catalog/merchant.ts`.
 */
import type { MerchantRoute } from '../catalog/merchant.ts';

export type RegistrationAction = 'register' | 'update' | 'delete';

export type UpstreamInput = { kind: 'url'; baseUrl: string; secretHeaders?: Record<string, string> } | { kind: 'file'; fileName: string; contentType: string; contentBase64: string };

export interface RouteInput {
  route: string;
  methods: ('GET' | 'POST')[];
  priceUsd: string;
  summary: string;
  description: string;
  input: string;
  /** Refuse x402 payments without a `payment-identifier` id (see `MerchantRoute.requirePaymentId`). */
  requirePaymentId?: boolean;
  /** Also accept x402 `batch-settlement` payment channels (see `MerchantRoute.batchSettlement`). */
  batchSettlement?: boolean;
}

/**
 * What the merchant signs (via its digest, see `signature.ts`). For `delete`, only `action`, `slug`, `payTo`,
 * `nonce` and `issuedAt` are required; any other field present is still covered by the signature.
 */
export interface Registration {
  action: RegistrationAction;
  slug: string;
  name: string;
  description: string;
  payTo: `0x${string}`;
  networks: string[];
  upstream: UpstreamInput;
  routes: RouteInput[];
  /** Random, chosen by the merchant: a signed message is accepted once per slug. */
  nonce: string;
  /** Unix seconds; must be within the clock-skew window of the gateway's clock. */
  issuedAt: number;
}

export type DeleteRegistration = Pick<Registration, 'action' | 'slug' | 'payTo' | 'nonce' | 'issuedAt'> & Partial<Registration>;

/** The body of `POST /api/merchants`. */
export interface RegistrationRequest {
  registration: Registration | DeleteRegistration;
  /** 65-byte EIP-712 signature (hex) by `registration.payTo` over {@link registrationTypedData}. */
  signature: `0x${string}`;
}

export type ValidatedUpstream = { kind: 'url'; baseUrl: string; secretHeaders: Record<string, string> } | { kind: 'file'; fileName: string; contentType: string; content: Uint8Array };

/** A register/update registration after validation: normalised (checksummed payTo, lower-case header names). */
export interface ValidatedUpsert {
  action: 'register' | 'update';
  slug: string;
  name: string;
  description: string;
  payTo: `0x${string}`;
  networks: string[];
  upstream: ValidatedUpstream;
  routes: MerchantRoute[];
  nonce: string;
  issuedAt: number;
}

export interface ValidatedDelete {
  action: 'delete';
  slug: string;
  payTo: `0x${string}`;
  nonce: string;
  issuedAt: number;
}

export type ValidatedRegistration = ValidatedUpsert | ValidatedDelete;
