import type { ExactEvmPayload, Permit2Payload } from '../../protocol/x402/types.ts';
import { permit2NonceKey } from './nonce-key.ts';
import { err } from '../../protocol/result.ts';
import { refusedPayer } from '../../verify/checks.ts';
import { Permit2Reason } from '../../verify/reasons.ts';
import type { PaymentScheme } from '../scheme.ts';
import { checkPermit2Terms } from './checks.ts';
import { permit2Consumption } from './consumption.ts';
import { diagnosePermit2 } from './revert-diagnosis.ts';
import { decodePermit2Call, permit2SettlementCall } from './settlement-call.ts';

const carries = (payload: ExactEvmPayload): payload is Permit2Payload => 'permit2Authorization' in payload;

function own(payload: ExactEvmPayload): Permit2Payload {
  if (!carries(payload)) throw new TypeError('not a Permit2 payload');
  return payload;
}

/** x402 `exact` with a Permit2 witness transfer, settled through the x402 exact-permit proxy (the permit's spender). */
export const permit2Scheme: PaymentScheme = {
  name: 'permit2',
  reasons: {
    signature: Permit2Reason.signature,
    assetNotDeployed: Permit2Reason.assetNotDeployed,
    amountMismatch: Permit2Reason.amountMismatch,
    nonceUsed: Permit2Reason.nonceUsed,
    transactionFailed: Permit2Reason.transactionFailed,
    simulationFailed: Permit2Reason.simulationFailed,
    transferEventMismatch: Permit2Reason.transferEventMismatch,
    insufficientBalance: Permit2Reason.insufficientBalance,
  },
  assetCheckedFirst: true,

  asks: (req) => req.extra?.assetTransferMethod === 'permit2',
  requirementsExtra: (network) => (network.exactPermit2Proxy ? { assetTransferMethod: 'permit2', spender: network.exactPermit2Proxy } : undefined),
  carries,
  payer: (payload) => own(payload).permit2Authorization.from,

  check({ requirements: req, accepted, payload, network, now }) {
    if (!carries(payload)) return err(Permit2Reason.payloadType, 'requirements ask for a Permit2 payload');
    const proxy = network.exactPermit2Proxy;
    if (!proxy) return err(Permit2Reason.proxyNotDeployed, `no exact-permit proxy is configured on ${req.network}`);
    const p = payload.permit2Authorization;
    const payer = p.from;
    const terms = checkPermit2Terms(req, accepted, payload, proxy, now);
    if (!terms.ok) return refusedPayer(terms.error, payer);
    return {
      ok: true,
      payer,
      payee: p.witness.to,
      amount: BigInt(p.permitted.amount),
      job: { kind: 'permit2', domain: { chainId: network.chainId, ...(network.permit2 ? { verifyingContract: network.permit2 } : {}) }, permit: p, signature: payload.signature },
      call: permit2SettlementCall(proxy, payload),
    };
  },

  settlementCall: (payload, { network }) => (network.exactPermit2Proxy ? permit2SettlementCall(network.exactPermit2Proxy, own(payload)) : undefined),
  decodeCall: decodePermit2Call,

  expectedTransfer(request) {
    const p = own(request.paymentPayload.payload).permit2Authorization;
    return { token: p.permitted.token, from: p.from, to: p.witness.to, value: BigInt(p.permitted.amount) };
  },

  nonceKey(request) {
    const p = own(request.paymentPayload.payload).permit2Authorization;
    return permit2NonceKey(request.paymentRequirements.network, p.from, p.nonce);
  },

  diagnoseRevert: (chain, call, payload) => diagnosePermit2(chain, call.to, own(payload)),
  consumption: (reads, payload, call) => permit2Consumption(reads, call, BigInt(own(payload).permit2Authorization.nonce)),
};
