/** The `info.x-guidance` text of discovery documents: how an agent pays for a call, in plain words. */
import { CAIP2, EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS } from '../../chain/canonical.ts';
import type { Network } from '../../chain/networks.ts';

/** What the gateway's challenger is configured with, where it helps a caller (all optional). */
export interface ChallengeInfo {
  /** The MPP `realm` of the challenges. */
  realm?: string;
  /** How long a challenge and a signed authorization stay valid. */
  maxTimeoutSeconds?: number;
  /** Who signs `Payment-Receipt` (an address or key id), and how to check it, in words. */
  receiptSigner?: string;
  /** Path of the gas sponsorship endpoint; `/api/gas/sponsor` by default. */
  gasSponsorPath?: string;
}

export function isPermit2Network(n: Network): boolean {
  return n.exactPermit2Proxy !== undefined || n.caip2 === CAIP2.stockChain;
}

function describeNetwork(n: Network): string {
  const coin = `${n.stablecoin.symbol} ${n.stablecoin.address}`;
  if (isPermit2Network(n)) {
    return (
      `${n.caip2} (${coin}): a Permit2 PermitWitnessTransferFrom signature ` +
      `(Permit2 ${n.permit2 ?? PERMIT2_ADDRESS}, spender = the exact-permit proxy ${n.exactPermit2Proxy ?? EXACT_PERMIT2_PROXY_ADDRESS}, witness.to = the recipient)`
    );
  }
  return `${n.caip2} (${coin}): an EIP-3009 TransferWithAuthorization signature over the token's EIP-712 domain ` + `(name "${n.stablecoin.name}", version "${n.stablecoin.version}")`;
}

/** The guidance text for the given accepted networks (in the order given). */
export function guidanceText(networks: Network[], baseUrl: string, info: ChallengeInfo = {}): string {
  const sponsor = `${baseUrl}${info.gasSponsorPath ?? '/api/gas/sponsor'}`;
  const permit2 = networks.filter(isPermit2Network);
  const timeout = info.maxTimeoutSeconds !== undefined ? ` Challenges and authorizations are valid for ${info.maxTimeoutSeconds} seconds.` : '';
  const lines = [
    'Every operation here is paid per request with a USD stablecoin over HTTP 402: no account, API key or session, only a wallet. ' +
      "Funds go directly from the payer to the merchant's wallet (x-payment-info.recipient); the gateway never holds them. " +
      "Each operation's x-payment-info gives its price (price.amount in USD, amount in atomic units with 6 decimals) and x-payment-offers lists one offer per accepted network.",
    '1. Call the operation without payment. The answer is 402 Payment Required (Cache-Control: no-store) carrying two equivalent challenges; nothing is charged: ' +
      'a PAYMENT-REQUIRED header (x402 version 2: standard base64 of the JSON {x402Version: 2, resource, accepts: [payment requirements]}) and ' +
      `WWW-Authenticate: Payment headers (MPP: id, realm${info.realm !== undefined ? ` "${info.realm}"` : ''}, method "evm", intent "charge", request, expires).${timeout}`,
    '2. Retry the identical request (same method, path, query and body) with one credential:',
    '   x402: a PAYMENT-SIGNATURE header, the base64 of the JSON PaymentPayload {x402Version: 2, accepted: <one entry of accepts, verbatim>, payload}, scheme "exact". ' +
      `Per network: ${networks.map(describeNetwork).join('; ')}.`,
    '   MPP: an Authorization: Payment header, the base64url of the JSON credential {challenge: <the challenge parameters, verbatim>, source, payload}, method "evm", intent "charge": ' +
      'the payload is an EIP-3009 authorization {type: "authorization", from, to, value, validAfter, validBefore, nonce, signature} with to = recipient, value = amount and nonce = keccak256(id + realm).',
    '3. The gateway verifies the credential, settles the transfer on-chain (it pays the gas), and only then forwards the request to the merchant. ' +
      "Success is 200 with the merchant's response passed through verbatim, plus a PAYMENT-RESPONSE header (x402: base64 JSON settlement result with the transaction hash) " +
      `or a Payment-Receipt header (MPP: base64url JSON receipt with the transaction reference${info.receiptSigner !== undefined ? `, signed by ${info.receiptSigner}` : ''}).`,
    '4. 202 means the settlement transaction was broadcast but not yet confirmed (settlement pending; the transaction hash is in the response): ' +
      'retry the identical request with the same credential later; a credential is settled at most once, so never sign a second payment for it. ' +
      'A 402 on the retry means the credential was rejected; the response carries the reason and a fresh challenge.',
  ];
  if (permit2.length > 0) {
    lines.push(
      `Permit2 networks (${permit2.map((n) => n.caip2).join(', ')}) need a one-time ERC-20 approval of Permit2 by the payer; ` +
        `a wallet without native gas can get that approval sponsored with POST ${sponsor} and the JSON body {"address": "<wallet>"}.`,
    );
  }
  lines.push(`Each merchant's discovery document is GET ${baseUrl}/m/{slug}/openapi.json (free); the list of paid resources is GET ${baseUrl}/.well-known/x402.`);
  return lines.join('\n');
}
