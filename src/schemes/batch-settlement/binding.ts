/**
 * The pure verification rules of the spec that need no chain state: the payload against the offer (rules 1 to 5 of
 * "Verification Rules": channel id, token, receiver, receiver authorizer, withdraw delay) and a deposit's token
 * authorization against its terms (transfer method, time window, Permit2 spender, amount and witness).
 */
import { getAddress } from 'viem';
import { chainIdOf } from '../../chain/canonical.ts';
import { PERMIT2_DEPOSIT_COLLECTOR_ADDRESS } from '../../chain/canonical.ts';
import { err, ok, type Result } from '../../protocol/result.ts';
import { sameAddress } from '../../verify/checks.ts';
import { channelIdOf, type ChannelConfig } from './channel-config.ts';
import { BATCH_SETTLEMENT_SCHEME, MAX_WITHDRAW_DELAY, MIN_WITHDRAW_DELAY } from './domain.ts';
import type { DepositPayload } from './payload.ts';
import { BatchReason, type BatchReasonCode } from '../../verify/batch-settlement-reasons.ts';
import { transferMethodOf, type BatchSettlementRequirements } from './requirements.ts';

/** Seconds an authorization must still be valid for when it is checked (as the official facilitator requires). */
export const AUTHORIZATION_BUFFER_SECONDS = 6n;

const ZERO = /^0x0{40}$/i;

/** Scheme, network and the token's EIP-712 domain of the client's `accepted` against the server's offer. */
export function checkOfferEnvelope(offer: BatchSettlementRequirements, accepted: { scheme: string; network: string }): Result<true, BatchReasonCode> {
  if (offer.scheme !== BATCH_SETTLEMENT_SCHEME || accepted.scheme !== BATCH_SETTLEMENT_SCHEME) return err(BatchReason.scheme, `scheme must be ${BATCH_SETTLEMENT_SCHEME}, got ${accepted.scheme}`);
  if (accepted.network !== offer.network) return err(BatchReason.networkMismatch, `payload is for ${accepted.network}, requirements for ${offer.network}`);
  if (typeof offer.extra.name !== 'string' || typeof offer.extra.version !== 'string') return err(BatchReason.missingEip712Domain, 'requirements.extra must carry the token EIP-712 name and version');
  return ok(true);
}

/**
 * The channel config binds to the offer: it hashes to the voucher's channel id on the offer's chain, pays the
 * offer's `payTo` in its `asset`, names its receiver authorizer and withdraw delay, and the delay is within bounds.
 * In the official facilitator's order, so both give the same reason for the same payload.
 */
export function checkChannelBinding(config: ChannelConfig, channelId: string, offer: BatchSettlementRequirements): Result<true, BatchReasonCode> {
  if (channelIdOf(config, chainIdOf(offer.network)) !== channelId.toLowerCase()) return err(BatchReason.channelIdMismatch, `the channel config does not hash to ${channelId}`);
  if (!sameAddress(config.receiver, offer.payTo)) return err(BatchReason.receiverMismatch, `the channel pays ${config.receiver}, the offer ${offer.payTo}`);
  const authorizer = String(offer.extra.receiverAuthorizer ?? '');
  if (!/^0x[0-9a-fA-F]{40}$/.test(authorizer) || ZERO.test(authorizer) || !sameAddress(config.receiverAuthorizer, authorizer)) {
    return err(BatchReason.receiverAuthorizerMismatch, `the channel's receiver authorizer is ${config.receiverAuthorizer}, the offer's ${authorizer || 'missing'}`);
  }
  if (!sameAddress(config.token, offer.asset)) return err(BatchReason.tokenMismatch, `the channel's token is ${config.token}, the offer's ${offer.asset}`);
  if (offer.extra.withdrawDelay !== undefined && config.withdrawDelay !== Number(offer.extra.withdrawDelay)) {
    return err(BatchReason.withdrawDelayMismatch, `the channel's withdraw delay is ${config.withdrawDelay}, the offer's ${offer.extra.withdrawDelay}`);
  }
  if (config.withdrawDelay < MIN_WITHDRAW_DELAY || config.withdrawDelay > MAX_WITHDRAW_DELAY)
    return err(BatchReason.withdrawDelayOutOfRange, `withdraw delay ${config.withdrawDelay} is outside [${MIN_WITHDRAW_DELAY}, ${MAX_WITHDRAW_DELAY}]`);
  return ok(true);
}

/**
 * A deposit's token authorization against its own terms at `now` (unix seconds): the method the offer asks for,
 * and for ERC-3009 the validity window; for Permit2 the signer is the payer, the spender the Permit2 collector,
 * the token and amount the deposit's, the witness the voucher's channel and the deadline not passed. Signatures
 * are checked elsewhere (they may need the chain).
 */
export function checkDepositAuthorizationTerms(payload: DepositPayload, offer: BatchSettlementRequirements, now: bigint): Result<true, BatchReasonCode> {
  const auth = payload.deposit.authorization;
  const method = transferMethodOf(offer);
  if (method === 'eip3009' && auth.kind !== 'erc3009') return err(BatchReason.erc3009AuthorizationRequired, 'the offer takes deposits by ERC-3009 authorization');
  if (method === 'permit2' && auth.kind !== 'permit2') return err(BatchReason.permit2AuthorizationRequired, 'the offer takes deposits by Permit2 authorization');
  if (auth.kind === 'erc3009') {
    if (auth.validBefore < now + AUTHORIZATION_BUFFER_SECONDS) return err(BatchReason.validBefore, `validBefore ${auth.validBefore} is too soon (now ${now})`);
    if (auth.validAfter > now) return err(BatchReason.validAfter, `validAfter ${auth.validAfter} is in the future (now ${now})`);
    return ok(true);
  }
  if (!sameAddress(auth.from, payload.config.payer)) return err(BatchReason.permit2InvalidSignature, `the permit is from ${auth.from}, the channel's payer is ${payload.config.payer}`);
  if (getAddress(auth.spender) !== getAddress(PERMIT2_DEPOSIT_COLLECTOR_ADDRESS))
    return err(BatchReason.permit2InvalidSpender, `the permit's spender ${auth.spender} is not the Permit2 deposit collector`);
  if (!sameAddress(auth.token, offer.asset)) return err(BatchReason.tokenMismatch, `the permit moves ${auth.token}, the offer's asset is ${offer.asset}`);
  if (auth.amount !== payload.deposit.amount) return err(BatchReason.permit2AmountMismatch, `the permit allows ${auth.amount}, the deposit is ${payload.deposit.amount}`);
  if (auth.witnessChannelId !== payload.voucher.channelId) return err(BatchReason.channelIdMismatch, "the permit's witness names another channel");
  if (auth.deadline < now + AUTHORIZATION_BUFFER_SECONDS) return err(BatchReason.permit2DeadlineExpired, `deadline ${auth.deadline} is too soon (now ${now})`);
  return ok(true);
}
