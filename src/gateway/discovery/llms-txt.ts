/**
 * `GET /llms.txt`: the marketplace described for agents in Markdown, as MPP tooling expects it (mppx's own proxy
 * serves one; `mppx validate` looks for it): what the marketplace is, how to pay with x402 and with MPP, and every
 * merchant with its routes and prices. Pure; its size is bounded whatever the registry holds.
 */
import type { Network, NetworkRegistry } from '../../chain/networks.ts';
import { routePath, type Merchant } from '../catalog/merchant.ts';
import { isPermit2Network } from './guidance.ts';
import { normalizeBaseUrl } from './openapi.ts';

/** Merchants listed by name and route; the rest are counted and left to the discovery documents. */
export const LLMS_TXT_MAX_MERCHANTS = 200;
/** Routes listed per merchant. */
const MAX_ROUTES_LISTED = 20;
/** A merchant's description is cut to this many characters. */
const MAX_DESCRIPTION = 300;

export interface LlmsTxtContext {
  baseUrl: string;
  networks: NetworkRegistry;
  /** The MPP realm of the challenges. */
  realm: string;
  title?: string;
}

const oneLine = (text: string, max: number): string => {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};

function howToPay(networks: Network[], base: string, realm: string): string[] {
  const permit2 = networks.filter(isPermit2Network).map((n) => n.caip2);
  return [
    '## How to pay',
    '',
    'Call a route without payment: the answer is `402 Payment Required` with two equivalent challenges. Nothing is charged until a signed payment settles on chain, ' +
      "straight from the payer's wallet to the merchant's; the gateway pays the gas and holds no funds.",
    '',
    '### x402 (version 2, scheme `exact`)',
    '',
    '1. Read the `PAYMENT-REQUIRED` header: base64 of `{x402Version: 2, resource, accepts: [offers], extensions}`; one offer per network.',
    `2. Sign the offer: on ${permit2.join(', ') || 'Permit2 networks'} a Permit2 \`PermitWitnessTransferFrom\` (spender = \`extra.spender\`, witness.to = \`payTo\`); ` +
      'elsewhere an EIP-3009 `TransferWithAuthorization` over the token domain in `extra.name` / `extra.version`.',
    '3. Retry the identical request with `PAYMENT-SIGNATURE`: base64 of `{x402Version: 2, accepted: <the offer, verbatim>, payload}`.',
    "4. The answer is 200 with the merchant's response and `PAYMENT-RESPONSE` (base64 settlement with the transaction hash); 202 means pending: retry with the same credential.",
    '',
    'Official clients: `@x402/fetch` with `@x402/evm` pay these routes unchanged.',
    '',
    '### MPP (`Payment` authentication, method `evm`, intent `charge`)',
    '',
    `1. Read \`WWW-Authenticate: Payment id=…, realm="${realm}", method="evm", intent="charge", request=…, expires=…\`; \`request\` is base64url JSON of amount, currency, recipient and chainId.`,
    '2. Sign an EIP-3009 authorization of exactly `amount` to `recipient`, with nonce = keccak256(id + realm).',
    '3. Retry the identical request with `Authorization: Payment <base64url credential>`; success carries a signed `Payment-Receipt`.',
    '',
    'Official client: `mppx` (configure the token EIP-712 name and version).',
    '',
    ...(permit2.length > 0
      ? [`Permit2 networks need a one-time ERC-20 approval of Permit2 by the payer; a wallet without gas gets it sponsored: \`POST ${base}/api/gas/sponsor\` with \`{"address": "<wallet>"}\`.`, '']
      : []),
  ];
}

/** The `/llms.txt` of the marketplace. */
export function llmsTxt(all: Merchant[], ctx: LlmsTxtContext): string {
  const base = normalizeBaseUrl(ctx.baseUrl);
  // Only public fields are read below (names, descriptions, routes and prices), never an upstream; a merchant on
  // no configured network is not payable here and is left out.
  const networks: Network[] = [];
  const merchants: Merchant[] = [];
  for (const m of all) {
    const accepted = m.networks.map((id) => ctx.networks.find(id)).filter((n): n is Network => n !== undefined);
    if (accepted.length === 0) continue;
    for (const n of accepted) if (!networks.includes(n)) networks.push(n);
    merchants.push(m);
  }
  const lines = [
    `# ${ctx.title ?? 'gate402 marketplace'}`,
    '',
    '> Machine-payable APIs behind one non-custodial payment gateway. Every route is paid per request over HTTP 402 with a USD stablecoin, ' +
      'by x402 (version 2) or MPP: no account, API key or session, only a wallet.',
    '',
    `Networks: ${networks.map((n) => `${n.caip2} (${n.stablecoin.symbol} ${n.stablecoin.address})`).join(', ') || 'none configured'}.`,
    '',
    ...howToPay(networks, base, ctx.realm),
    '## Merchants',
    '',
  ];
  for (const m of merchants.slice(0, LLMS_TXT_MAX_MERCHANTS)) {
    lines.push(`### ${oneLine(m.name, 80)} (\`${m.slug}\`)`, '', oneLine(m.description, MAX_DESCRIPTION), '', `Discovery: ${base}/m/${m.slug}/openapi.json`, '');
    for (const r of m.routes.slice(0, MAX_ROUTES_LISTED)) {
      lines.push(`- \`${r.methods.join(', ')} ${base}${routePath(m.slug, r.route)}\`: ${oneLine(r.summary, 120)}. ${r.priceUsd} USD per call.`);
    }
    if (m.routes.length > MAX_ROUTES_LISTED) lines.push(`- … ${m.routes.length - MAX_ROUTES_LISTED} more routes in its discovery document.`);
    lines.push('');
  }
  if (merchants.length > LLMS_TXT_MAX_MERCHANTS) lines.push(`… and ${merchants.length - LLMS_TXT_MAX_MERCHANTS} more merchants: see the index below.`, '');
  lines.push(
    '## Discovery',
    '',
    `- [OpenAPI index of every paid route](${base}/openapi.json): prices in \`x-payment-info\`, every network's offer in \`x-payment-offers\`, the flows in \`info.x-guidance\`.`,
    `- [Paid resources for x402 crawlers](${base}/.well-known/x402)`,
    '- The facilitator lists the same resources for x402 bazaar clients at `GET /discovery/resources`.',
    '',
  );
  return lines.join('\n');
}
