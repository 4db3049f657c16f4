import type { Address } from 'viem';
import type { Eip3009Payload, ExactEvmPayload } from '../../protocol/x402/types.ts';
import { eip3009NonceKey } from './nonce-key.ts';
import { err } from '../../protocol/result.ts';
import { refusedPayer } from '../../verify/checks.ts';
import { Eip3009Reason } from '../../verify/reasons.ts';
import type { PaymentScheme } from '../scheme.ts';
import { checkEip3009Envelope, checkEip3009Terms } from './checks.ts';
import { eip3009Consumption } from './consumption.ts';
import { diagnoseEip3009 } from './revert-diagnosis.ts';
import { decodeEip3009Call, eip3009SettlementCall } from './settlement-call.ts';

const carries = (payload: ExactEvmPayload): payload is Eip3009Payload => 'authorization' in payload;

function own(payload: ExactEvmPayload): Eip3009Payload {
  if (!carries(payload)) throw new TypeError('not an EIP-3009 payload');
  return payload;
}

/** x402 `exact` with an EIP-3009 `transferWithAuthorization`, sent to the token itself. */
export const eip3009Scheme: PaymentScheme = {
  name: 'eip3009',
  reasons: {
    signature: Eip3009Reason.signature,
    assetNotDeployed: Eip3009Reason.assetNotDeployed,
    amountMismatch: Eip3009Reason.valueMismatch,
    nonceUsed: Eip3009Reason.nonceUsed,
    transactionFailed: Eip3009Reason.transactionFailed,
    simulationFailed: Eip3009Reason.simulationFailed,
    transferEventMismatch: Eip3009Reason.transferEventMismatch,
    insufficientBalance: Eip3009Reason.insufficientBalance,
  },
  assetCheckedFirst: false,

  /** Requirements that name no transfer method, or EIP-3009, ask for it (the reference's default). */
  asks: (req) => req.extra?.assetTransferMethod === undefined || req.extra.assetTransferMethod === 'eip3009',
  requirementsExtra: (network) => ({ name: network.stablecoin.name, version: network.stablecoin.version }),
  carries,
  payer: (payload) => own(payload).authorization.from,

  check({ requirements: req, accepted, payload, network, token, now }) {
    if (!carries(payload)) return err(Eip3009Reason.scheme, 'requirements ask for an EIP-3009 authorization');
    const a = payload.authorization;
    const payer: Address = a.from;
    const envelope = checkEip3009Envelope(req, accepted);
    if (!envelope.ok) return refusedPayer(envelope.error, payer);
    const terms = checkEip3009Terms(req, payload, token, now);
    if (!terms.ok) return refusedPayer(terms.error, payer);
    return {
      ok: true,
      payer,
      payee: a.to,
      amount: BigInt(a.value),
      job: {
        kind: 'eip3009',
        domain: { name: String(req.extra?.name), version: String(req.extra?.version), chainId: network.chainId, verifyingContract: token.address },
        authorization: a,
        signature: payload.signature,
      },
      call: eip3009SettlementCall(token.address, payload),
    };
  },

  settlementCall: (payload, { token }) => eip3009SettlementCall(token.address, own(payload)),
  decodeCall: decodeEip3009Call,

  expectedTransfer(request) {
    const a = own(request.paymentPayload.payload).authorization;
    return { token: request.paymentRequirements.asset, from: a.from, to: a.to, value: BigInt(a.value) };
  },

  nonceKey(request) {
    const a = own(request.paymentPayload.payload).authorization;
    return eip3009NonceKey(request.paymentRequirements.network, request.paymentRequirements.asset, a.from, a.nonce);
  },

  diagnoseRevert: (chain, call, payload) => diagnoseEip3009(chain, call.to, own(payload)),
  consumption: (reads, payload, call) => eip3009Consumption(reads, call.expect, own(payload).authorization.nonce),
};
