/**
 * Payers of payment channels as the claim tests drive them: funded on the devnet, paying a route through the
 * official client (a deposit of `deposits` prices, then vouchers), each answer checked for the cumulative charge;
 * the channel a payer opened; the settlement contract's events.
 */
import { decodePaymentResponseHeader } from '@x402/core/http';
import { parseEventLogs, parseUnits, type Hex, type LocalAccount } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS } from '../../src/chain/canonical.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { batchSettlementAbi } from '../../src/schemes/batch-settlement/abi.ts';
import type { ChannelConfig } from '../../src/schemes/batch-settlement/channel-config.ts';
import { channelBuyer, decodedCredential, type ChannelBuyer } from './channel-buyer.ts';
import { clientsFor, freshAccount, tester } from './devnet.ts';
import { fundedPayer } from './payments.ts';

export interface ChannelPayer {
  account: LocalAccount;
  buyer: ChannelBuyer;
  paid: number;
}

export async function newChannelPayer(n: NetworkEntry, deposits: number): Promise<ChannelPayer> {
  const account = await fundedPayer(n, `eip155:${n.chainId}`, tester('channelsHostile'), parseUnits('1', 6));
  return { account, buyer: channelBuyer(n, account, { depositMultiplier: deposits }), paid: 0 };
}

/** `times` paid requests to `url`, each answered 200 with the channel charged one more `price`. */
export async function payChannel(p: ChannelPayer, url: string, times: number, price: bigint): Promise<void> {
  for (let i = 0; i < times; i++) {
    const res = await p.buyer.pay(url);
    if (res.status !== 200) throw new Error(`payment ${p.paid + 1} at ${url}: ${res.status} ${await res.text()}`);
    const charged = decodePaymentResponseHeader(res.headers.get('payment-response') as string).extra?.channelState as { chargedCumulativeAmount: string };
    p.paid += 1;
    if (BigInt(charged.chargedCumulativeAmount) !== BigInt(p.paid) * price) throw new Error(`charged ${charged.chargedCumulativeAmount} after ${p.paid} payments`);
  }
}

/** The channel the payer's first credential opened. */
export function channelOf(p: ChannelPayer): { config: ChannelConfig; channelId: Hex } {
  const payload = decodedCredential(p.buyer.sent[0] as string).payload;
  return { config: payload.channelConfig as ChannelConfig, channelId: (payload.voucher as { channelId: Hex }).channelId };
}

/** The settlement contract's events of one name on `n` since `fromBlock`. */
export async function settlementEvents(n: NetworkEntry, eventName: 'Claimed' | 'Settled', fromBlock = 0n) {
  const { pub } = clientsFor(n, freshAccount());
  const logs = await pub.getLogs({ address: BATCH_SETTLEMENT_ADDRESS, fromBlock, toBlock: 'latest' });
  return parseEventLogs({ abi: batchSettlementAbi, logs, eventName });
}
