/**
 * Which `/verify` and `/settle` bodies are answered in the protocol's terms. A body that is a verify request (a JSON
 * object whose `paymentPayload` and `paymentRequirements` are objects) is always answered with a 200, as the
 * reference facilitator protocol fixes: one this facilitator will not judge (another x402 version, scheme or network,
 * an asset it does not settle, a payload or requirements object that does not decode) is refused with the reference's
 * reason code, before any RPC. Only a body that is not a verify request at all is a 400. Pure.
 */
import type { NetworkRegistry } from '../chain/networks.ts';
import { decodeFacilitatorRequest } from '../protocol/x402/facilitator-body.ts';
import { parseJsonBytes } from '../protocol/x402/codec.ts';
import { ok, type CodecError, type Err, type Ok } from '../protocol/result.ts';
import type { VerifyRequest } from '../protocol/x402/types.ts';
import { GatewayReason, RequestReason } from '../verify/reasons.ts';
import { asksBatchSettlement, decodeBatchRequest } from '../schemes/batch-settlement/request.ts';

/** Not a verify request: a 400 with what was wrong. */
export interface Malformed {
  kind: 'malformed';
  error: CodecError;
}

/** A verify request refused unjudged: `isValid: false` / `success: false` with `code`, on `network` as it was asked. */
export interface Unjudged {
  kind: 'refused';
  code: string;
  message: string;
  network: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function reasonOf(error: CodecError): string {
  switch (error.code) {
    case 'unsupported_version':
      return RequestReason.version;
    case 'unsupported_scheme':
      return RequestReason.unsupportedScheme;
    case 'unsupported_network':
      return RequestReason.invalidNetwork;
    default:
      // The message starts with the failing field's JSON pointer.
      return error.message.startsWith('/paymentRequirements') ? RequestReason.invalidRequirements : RequestReason.invalidPayload;
  }
}

/** The verify request of `body`, or why it is refused (answered 200) or not one at all (answered 400). */
export function admitRequest(body: Uint8Array, maxBodyBytes: number, networks: NetworkRegistry): Ok<VerifyRequest> | Err<Malformed | Unjudged> {
  const decoded = decodeFacilitatorRequest(body, maxBodyBytes);
  if (!decoded.ok) {
    if (decoded.error.code === 'too_large' || decoded.error.code === 'not_json') return { ok: false, error: { kind: 'malformed', error: decoded.error } };
    const json = parseJsonBytes(body);
    const value = json.ok ? json.value : undefined;
    if (!isObject(value) || !isObject(value.paymentPayload) || !isObject(value.paymentRequirements)) return { ok: false, error: { kind: 'malformed', error: decoded.error } };
    const network = typeof value.paymentRequirements.network === 'string' ? value.paymentRequirements.network.slice(0, 64) : '';
    // The `batch-settlement` scheme has a codec of its own (its payloads are judged by the engine, in its reasons).
    if (asksBatchSettlement(value)) {
      const batch = decodeBatchRequest(value);
      if (!batch.ok) return { ok: false, error: { kind: 'refused', code: batch.error.code, message: batch.error.message, network } };
      return served(batch.value, networks);
    }
    return { ok: false, error: { kind: 'refused', code: reasonOf(decoded.error), message: decoded.error.message, network } };
  }
  return served(decoded.value, networks);
}

/** The request, unless its network or asset is not settled here. */
function served(request: VerifyRequest, networks: NetworkRegistry): Ok<VerifyRequest> | Err<Unjudged> {
  const req = request.paymentRequirements;
  if (!networks.has(req.network)) return { ok: false, error: { kind: 'refused', code: RequestReason.invalidNetwork, message: `network ${req.network} is not served here`, network: req.network } };
  if (!networks.stablecoinOn(req.network, req.asset)) {
    return { ok: false, error: { kind: 'refused', code: GatewayReason.unsupportedAsset, message: `asset ${req.asset} is not settled on ${req.network}`, network: req.network } };
  }
  return ok(request);
}
