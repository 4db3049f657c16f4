/**
 * OpenAPI 3.1 discovery documents: one per merchant (`GET /m/{slug}/openapi.json`) and one root index that
 * aggregates every merchant. Pure functions of the merchants and the configured networks.
 *
 * Operation ids: every route has the id `{slug}-{route}`. A route with both GET and POST keeps that id for GET,
 * and its POST operation is `{slug}-{route}-post` (OpenAPI requires unique ids). A route that takes appended
 * path segments gets, beside its own path, one templated path per segment shape, e.g.
 * `/m/wiki/summary/{title}` with id `wiki-summary-title` (`{slug}-{route}-{segments key}`), priced the same.
 * Every operation carries `x-payment-info` (spec section 2.2, its flat fields), `x-payment-offers` (one offer per
 * accepted network) and `x-gate402-route` naming its route's id. The document names `/llms.txt` in `x-service-info`.
 */
import { CAIP2, EXACT_PERMIT2_PROXY_ADDRESS } from '../../chain/canonical.ts';
import type { Network, NetworkRegistry } from '../../chain/networks.ts';
import { parseDecimalAmount } from '../../protocol/amounts.ts';
import { publicMerchant, routePath, type HttpMethod, type JsonSchema, type Merchant, type MerchantRoute, type PublicMerchant, type RouteParameter } from '../catalog/merchant.ts';
import { guidanceText, isPermit2Network, type ChallengeInfo } from './guidance.ts';
import { exampleValue } from './paid-resource.ts';

export type { ChallengeInfo } from './guidance.ts';

export interface DiscoveryContext {
  /** The gateway's public origin, e.g. `https://pay.example.com` (a trailing `/` is ignored). */
  baseUrl: string;
  networks: NetworkRegistry;
  contactEmail: string;
  challengeInfo?: ChallengeInfo;
  /** Title of the root document; `gate402 marketplace` by default. */
  title?: string;
}

export class DiscoveryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DiscoveryError';
  }
}

export type OpenApiDocument = Record<string, unknown> & { openapi: '3.1.0'; paths: Record<string, Record<string, Record<string, unknown>>> };

export interface Offer {
  amount: string;
  currency: string;
  network: string;
  recipient: string;
  scheme: 'exact';
  extra: { assetTransferMethod: 'permit2'; spender: string } | { name: string; version: string };
}

export interface PaymentInfo {
  price: { mode: 'fixed'; currency: 'USD'; amount: string };
  protocols: [{ mpp: { method: 'evm'; intent: 'charge'; currency: string } }, { x402: Record<string, never> }];
  amount: string;
  currency: string;
  network: string;
  recipient: string;
  scheme: 'exact';
  intent: 'charge';
  method: 'evm';
  extra: Offer['extra'];
}

const METHOD_ORDER: HttpMethod[] = ['GET', 'POST'];

export function normalizeBaseUrl(baseUrl: string): string {
  return baseUrl.replace(/\/+$/, '');
}

/** The configured networks a merchant accepts, in the merchant's order. Throws when there is none. */
export function acceptedNetworks(merchant: PublicMerchant, networks: NetworkRegistry): Network[] {
  const found = merchant.networks.map((id) => networks.find(id)).filter((n): n is Network => n !== undefined);
  if (found.length === 0) {
    throw new DiscoveryError(`merchant ${merchant.slug} accepts none of the configured networks (${merchant.networks.join(', ') || 'none'})`);
  }
  return found;
}

function offerFor(route: MerchantRoute, merchant: PublicMerchant, n: Network): Offer {
  const amount = parseDecimalAmount(route.priceUsd, n.stablecoin.decimals);
  if (amount === undefined) throw new DiscoveryError(`route ${route.operationId}: price ${route.priceUsd} is not payable in ${n.stablecoin.decimals}-decimal units`);
  return {
    amount: amount.toString(),
    currency: n.stablecoin.address,
    network: n.caip2,
    recipient: merchant.payTo,
    scheme: 'exact',
    extra: isPermit2Network(n) ? { assetTransferMethod: 'permit2', spender: n.exactPermit2Proxy ?? EXACT_PERMIT2_PROXY_ADDRESS } : { name: n.stablecoin.name, version: n.stablecoin.version },
  };
}

/** One offer per network the merchant accepts, in its order: the operation's `x-payment-offers`. */
export function paymentOffers(merchant: PublicMerchant, route: MerchantRoute, networks: NetworkRegistry): Offer[] {
  return acceptedNetworks(merchant, networks).map((n) => offerFor(route, merchant, n));
}

/**
 * The `x-payment-info` of a route: the spec's flat fields, for the stock chain's offer (eip155:4663, Permit2) when
 * the merchant accepts it, else its first accepted configured network. The list of every offer is the operation's
 * `x-payment-offers`, beside it: the MPP discovery draft forbids mixing an `offers` list with the flat fields.
 */
export function paymentInfo(merchant: PublicMerchant, route: MerchantRoute, networks: NetworkRegistry): PaymentInfo {
  const offers = paymentOffers(merchant, route, networks);
  const primary = offers.find((o) => o.network === CAIP2.stockChain) ?? offers[0]!;
  return {
    price: { mode: 'fixed', currency: 'USD', amount: route.priceUsd },
    protocols: [{ mpp: { method: 'evm', intent: 'charge', currency: primary.currency } }, { x402: {} }],
    amount: primary.amount,
    currency: primary.currency,
    network: primary.network,
    recipient: primary.recipient,
    scheme: 'exact',
    intent: 'charge',
    method: 'evm',
    extra: primary.extra,
  };
}

// ---------------------------------------------------------------- components

const FREE_FORM_PARAMS = {
  name: 'params',
  in: 'query',
  required: false,
  description: 'Any query keys (form style), forwarded to the upstream verbatim.',
  style: 'form',
  explode: true,
  schema: { type: 'object', additionalProperties: true },
};

function components(): Record<string, unknown> {
  const str = { type: 'string' };
  return {
    securitySchemes: {
      x402: {
        type: 'apiKey',
        in: 'header',
        name: 'PAYMENT-SIGNATURE',
        description: "x402 version 2: base64 of the JSON PaymentPayload answering this request's 402 PAYMENT-REQUIRED challenge. Signed per request; there is no key to obtain.",
      },
      mpp: {
        type: 'http',
        scheme: 'Payment',
        description: "MPP (method evm, intent charge): `Authorization: Payment <base64url credential>` answering this request's `WWW-Authenticate: Payment` challenge.",
      },
    },
    headers: {
      PaymentRequired: {
        description: 'x402 version 2 challenge: standard base64 of the JSON `{x402Version: 2, resource, accepts: [PaymentRequirements]}`.',
        required: true,
        schema: str,
      },
      WwwAuthenticate: {
        description: 'MPP challenge(s): `Payment id="…", realm="…", method="evm", intent="charge", request="<base64url JSON>", expires="<RFC 3339>"`.',
        required: true,
        schema: str,
      },
      PaymentResponse: { description: 'x402: base64 of the JSON settlement result `{success, transaction, network, payer}`.', schema: str },
      PaymentReceipt: { description: 'MPP: base64url of the JSON receipt `{status: "success", method: "evm", reference: <tx hash>, timestamp}`.', schema: str },
    },
    schemas: {
      Problem: {
        type: 'object',
        properties: {
          type: { type: 'string' },
          title: { type: 'string' },
          status: { type: 'integer' },
          detail: { type: 'string' },
          challengeId: { type: 'string' },
        },
        additionalProperties: true,
      },
      UpstreamObject: { type: 'object', additionalProperties: true, description: 'The upstream response, passed through verbatim.' },
    },
    responses: {
      PaymentRequired: {
        description: 'Payment Required: no valid payment credential. Nothing was charged; pay with one of the challenges and retry.',
        headers: {
          'PAYMENT-REQUIRED': { $ref: '#/components/headers/PaymentRequired' },
          'WWW-Authenticate': { $ref: '#/components/headers/WwwAuthenticate' },
          'Cache-Control': { description: '`no-store`', schema: str },
        },
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      },
      SettlementPending: {
        description: 'Settlement pending: the payment transaction was broadcast but not yet confirmed. Retry the identical request with the same credential later; it is settled at most once.',
        headers: { 'PAYMENT-RESPONSE': { $ref: '#/components/headers/PaymentResponse' } },
        content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
      },
    },
  };
}

// ---------------------------------------------------------------- operations

function parameter(param: RouteParameter, where: 'query' | 'path'): Record<string, unknown> {
  const example = exampleValue(param);
  return {
    name: param.name,
    in: where,
    required: where === 'path' ? true : param.required === true,
    description: param.description,
    schema: structuredClone(param.schema),
    ...(example !== undefined ? { example } : {}),
  };
}

function okResponse(merchant: PublicMerchant, route: MerchantRoute): Record<string, unknown> {
  const headers = {
    'PAYMENT-RESPONSE': { $ref: '#/components/headers/PaymentResponse' },
    'Payment-Receipt': { $ref: '#/components/headers/PaymentReceipt' },
  };
  const up = merchant.upstream;
  if (up.kind === 'file') {
    return { description: `The merchant's file (${up.size} bytes, sha256 ${up.sha256}).`, headers, content: { [up.contentType]: { schema: {} } } };
  }
  const schema = route.shape?.response === 'number' ? { type: 'number' } : { $ref: '#/components/schemas/UpstreamObject' };
  return { description: 'Success: the upstream response, passed through verbatim.', headers, content: { 'application/json': { schema } } };
}

export interface DiscoveryOperation {
  path: string;
  method: 'get' | 'post';
  operation: Record<string, unknown>;
}

/** Every OpenAPI operation of one merchant, in route order. */
export function merchantOperations(merchant: PublicMerchant, networks: NetworkRegistry): DiscoveryOperation[] {
  const ops: DiscoveryOperation[] = [];
  for (const route of merchant.routes) {
    const info = paymentInfo(merchant, route, networks);
    const offers = paymentOffers(merchant, route, networks);
    const shape = route.shape;
    const base = routePath(merchant.slug, route.route);
    const methods = METHOD_ORDER.filter((m) => route.methods.includes(m));
    const variants: { path: string; idSuffix: string; pathParams: RouteParameter[]; note: string }[] = [
      {
        path: base,
        idSuffix: '',
        pathParams: [],
        note: shape === undefined ? ' Further path segments may be appended; they are forwarded to the upstream.' : '',
      },
      ...(shape?.segments ?? []).map((s) => ({
        path: `${base}/${s.template}`,
        idSuffix: `-${s.key}`,
        pathParams: s.parameters,
        note: ` This form, ${base}/${s.template}: ${s.description}`,
      })),
    ];
    for (const v of variants) {
      for (const method of methods) {
        const both = methods.length > 1 && method === 'POST';
        const parameters: Record<string, unknown>[] = v.pathParams.map((p) => parameter(p, 'path'));
        const named = method === 'GET' || methods.length === 1;
        if (named) parameters.push(...(shape?.query ?? []).map((p) => parameter(p, 'query')));
        if (shape === undefined || shape.freeFormQuery === true) parameters.push(structuredClone(FREE_FORM_PARAMS));
        const operation: Record<string, unknown> = {
          operationId: `${route.operationId}${v.idSuffix}${both ? '-post' : ''}`,
          summary: both ? `${route.summary} (JSON body)` : route.summary,
          description: `${route.description}${v.note} Price: ${route.priceUsd} USD per call.`,
          tags: [merchant.slug],
          ...(parameters.length > 0 ? { parameters } : {}),
        };
        if (method === 'POST') {
          const body = shape?.body ?? { required: false, description: 'A JSON object, forwarded verbatim.', schema: { type: 'object', additionalProperties: true } };
          operation.requestBody = { required: body.required, description: body.description, content: { 'application/json': { schema: structuredClone(body.schema) as JsonSchema } } };
        }
        operation.responses = {
          '200': okResponse(merchant, route),
          '202': { $ref: '#/components/responses/SettlementPending' },
          '402': { $ref: '#/components/responses/PaymentRequired' },
        };
        operation.security = [{ x402: [] }, { mpp: [] }];
        operation['x-gate402-route'] = route.operationId;
        operation['x-payment-info'] = structuredClone(info);
        operation['x-payment-offers'] = structuredClone(offers);
        ops.push({ path: v.path, method: method === 'GET' ? 'get' : 'post', operation });
      }
    }
  }
  return ops;
}

function tagOf(merchant: PublicMerchant, baseUrl: string): Record<string, unknown> {
  return {
    name: merchant.slug,
    description: `${merchant.name}: ${merchant.description}`,
    externalDocs: { description: 'Discovery document of this merchant', url: `${baseUrl}/m/${merchant.slug}/openapi.json` },
  };
}

function document(all: Merchant[], ctx: DiscoveryContext, title: string, description: string): OpenApiDocument {
  // Only the public view of a merchant goes into a document: no code below can reach an upstream origin or secret.
  const merchants = all.map(publicMerchant);
  const baseUrl = normalizeBaseUrl(ctx.baseUrl);
  const paths: Record<string, Record<string, Record<string, unknown>>> = {};
  const ids = new Set<string>();
  const networks: Network[] = [];
  for (const merchant of merchants) {
    for (const n of acceptedNetworks(merchant, ctx.networks)) if (!networks.includes(n)) networks.push(n);
    for (const { path, method, operation } of merchantOperations(merchant, ctx.networks)) {
      const id = operation.operationId as string;
      if (ids.has(id)) throw new DiscoveryError(`duplicate operationId ${id}`);
      ids.add(id);
      paths[path] ??= {};
      const item = paths[path];
      if (item[method] !== undefined) throw new DiscoveryError(`duplicate operation ${method.toUpperCase()} ${path}`);
      item[method] = operation;
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title,
      version: '1.0.0',
      description,
      contact: { email: ctx.contactEmail },
      'x-guidance': guidanceText(networks, baseUrl, ctx.challengeInfo),
    },
    'x-service-info': { categories: ['marketplace'], docs: { llms: `${baseUrl}/llms.txt`, apiReference: `${baseUrl}/openapi.json` } },
    servers: [{ url: baseUrl }],
    tags: merchants.map((m) => tagOf(m, baseUrl)),
    paths,
    components: components(),
  };
}

/** The discovery document of one merchant (`GET /m/{slug}/openapi.json`). Never reveals the upstream. */
export function merchantOpenApi(merchant: Merchant, ctx: DiscoveryContext): OpenApiDocument {
  return document([merchant], ctx, merchant.name, `${merchant.description} Paid per request over HTTP 402 (x402 v2 or MPP); see x-guidance.`);
}

/** The root index: every merchant's operations under their full `/m/{slug}/{route}` paths. */
export function rootOpenApi(merchants: Merchant[], ctx: DiscoveryContext): OpenApiDocument {
  const slugs = new Set<string>();
  for (const m of merchants) {
    if (slugs.has(m.slug)) throw new DiscoveryError(`duplicate merchant slug ${m.slug}`);
    slugs.add(m.slug);
  }
  return document(
    merchants,
    ctx,
    ctx.title ?? 'gate402 marketplace',
    'Machine-payable APIs behind one payment gateway. Every route is paid per request over HTTP 402 with a USD stablecoin (x402 v2 or MPP); see x-guidance.',
  );
}
