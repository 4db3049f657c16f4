import type { Err, Ok } from '../protocol/result.ts';
import type { SettleResponse, VerifyRequest } from '../protocol/x402/types.ts';
import type { NetworkRegistry } from '../chain/networks.ts';
import type { SettlementEngine } from '../engine/settlement-engine.ts';
import { parseJsonBytes } from '../protocol/x402/codec.ts';
import { SETTLEMENT_SHED } from '../ports/settlement.ts';
import { GatewayReason } from '../verify/reasons.ts';
import type { PaymentAdmission } from './admission.ts';
import type { ChannelOperations } from './channel-operations.ts';
import { admitRequest } from './request-refusal.ts';
import type { FacilitatorService, ServiceAnswer } from './service.ts';

/**
 * The facilitator's routes over the settlement engine. A body that is not a verify request is the client's mistake:
 * 400 with what was wrong. One this facilitator does not judge (another version, scheme, network or asset; a payload
 * that does not decode) is a 200 refusal with the reference's code (`request-refusal.ts`). A payment that
 * `admission` refuses (pure checks and the payer's quota) is answered as the protocol answers any refusal, a 200 with
 * `isValid: false` / `success: false` and the reason, and costs no RPC call.
 */
export function settlementService(
  engine: SettlementEngine,
  networks: NetworkRegistry,
  maxBodyBytes: number,
  health: () => Promise<Record<string, unknown>>,
  admission?: PaymentAdmission,
  onUnexpected: (route: 'verify' | 'settle', err: unknown) => void = () => {},
  onShed?: (network: string, reason: string) => void,
  operations?: ChannelOperations,
): FacilitatorService {
  /** The request of a body, or the answer that refuses it: a 400 for a body that is no verify request, else a 200. */
  const decode = (body: Uint8Array, route: 'verify' | 'settle'): Ok<VerifyRequest> | Err<ServiceAnswer> => {
    const admitted = admitRequest(body, maxBodyBytes, networks);
    if (admitted.ok) return admitted;
    const e = admitted.error;
    if (e.kind === 'malformed') return { ok: false, error: { status: 400, body: { error: e.error.message, code: e.error.code } } };
    if (route === 'verify') return { ok: false, error: { status: 200, body: { isValid: false, invalidReason: e.code, invalidMessage: e.message } } };
    return { ok: false, error: { status: 200, body: { success: false, errorReason: e.code, errorMessage: e.message, transaction: '', network: e.network } } };
  };
  return {
    supported: () => engine.supported(),
    async verify(body) {
      const d = decode(body, 'verify');
      if (!d.ok) return d.error;
      try {
        // A voucher is only read against its channel (nothing is sent for it): the door's quota is for payments sent.
        const admitted = admission && engine.sendsPayment(d.value) ? await admission.admit(d.value) : undefined;
        if (admitted && !admitted.ok) {
          return {
            status: 200,
            body: { isValid: false, invalidReason: admitted.error.code, invalidMessage: admitted.error.message, ...(admitted.error.payer ? { payer: admitted.error.payer } : {}) },
          };
        }
        return { status: 200, body: await engine.verify(d.value) };
      } catch (err) {
        // A payment nothing foresaw is still answered in the protocol's terms: refused, with the shared reason code.
        onUnexpected('verify', err);
        return { status: 200, body: { isValid: false, invalidReason: GatewayReason.unexpected, invalidMessage: 'the payment could not be checked' } };
      }
    },
    async settle(body, client) {
      // A receiver's `batch-settlement` claim or sweep (the official server's channel manager): no payer, no price.
      const operation = operations ? receiverOperationOf(body, operations) : undefined;
      if (operation) {
        try {
          return { status: 200, body: await (operations as ChannelOperations).settle(operation) };
        } catch (err) {
          onUnexpected('settle', err);
          const network = String(operation.paymentRequirements.network) as SettleResponse['network'];
          return {
            status: 200,
            body: { success: false, errorReason: GatewayReason.unexpectedSettle, errorMessage: 'the operation could not be completed; ask again with the same payload', transaction: '', network },
          };
        }
      }
      const d = decode(body, 'settle');
      if (!d.ok) return d.error;
      const admit = admission
        ? async (request: VerifyRequest): Promise<SettleResponse | undefined> => {
            const admitted = await admission.admit(request);
            if (admitted.ok) return undefined;
            const network = request.paymentRequirements.network as SettleResponse['network'];
            return {
              success: false,
              errorReason: admitted.error.code,
              errorMessage: admitted.error.message,
              transaction: '',
              network,
              ...(admitted.error.payer ? { payer: admitted.error.payer } : {}),
            };
          }
        : undefined;
      // Settlement behind: a new payment is turned away before anything is checked or charged (the same payment
      // asked again later is settled as if it came then; one the engine already knows is always answered).
      const behind = (reason: string, retryAfterSeconds: number): ServiceAnswer => ({
        status: 503,
        body: { error: 'settlement is behind right now; nothing was settled', reason },
        headers: { 'retry-after': String(retryAfterSeconds) },
      });
      const shed = await engine.shedding(d.value, client);
      if (shed !== undefined) {
        onShed?.(d.value.paymentRequirements.network, shed.reason);
        return behind(shed.reason, shed.retryAfterSeconds);
      }
      try {
        const settled = await (admit ? engine.settleAdmitting(d.value, admit, client) : engine.settle(d.value, client));
        // Turned away at the queue's door (this client's share; counted by the engine): a 503 as above.
        if (!settled.success && settled.errorReason === SETTLEMENT_SHED) {
          return behind(String(settled.extra?.reason ?? 'queue_full'), Number(settled.extra?.retryAfterSeconds ?? 1));
        }
        return { status: 200, body: settled };
      } catch (err) {
        // Whatever the engine did is in its records: the same request asked again is answered from them.
        onUnexpected('settle', err);
        const network = d.value.paymentRequirements.network as SettleResponse['network'];
        return {
          status: 200,
          body: { success: false, errorReason: GatewayReason.unexpectedSettle, errorMessage: 'the settlement could not be completed; ask again with the same payment', transaction: '', network },
        };
      }
    },
    async health() {
      try {
        return { ok: true, details: await health() };
      } catch (err) {
        return { ok: false, details: { error: (err as Error).message } };
      }
    },
  };
}

const CLAIM = Buffer.from('"claim"');
const SWEEP = Buffer.from('"settle"');
const REFUND = Buffer.from('"refundAuthorizerSignature"');

/** The body as a receiver-side operation, when it is one (only bodies naming one are parsed here). */
function receiverOperationOf(body: Uint8Array, operations: ChannelOperations): VerifyRequest | undefined {
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (!bytes.includes(CLAIM) && !bytes.includes(SWEEP) && !bytes.includes(REFUND)) return undefined;
  const parsed = parseJsonBytes(body);
  return parsed.ok && operations.handles(parsed.value) ? parsed.value : undefined;
}
