/**
 * `GET /api/channels/:channelId`: a payment channel as its payer sees it, from the gateway's record (one key read):
 * its balance (deposits less refunds), what the gateway charged (spent), what is left to spend, what was claimed on chain so far, and
 * a pending withdrawal's deadline. 400 `{error}` for a malformed id, 404 `{error}` for a channel this gateway holds no
 * record of. Nothing in it is secret: the channel's terms and balances are on chain.
 */
import type { Hex } from 'viem';
import type { NetworkRegistry } from '../chain/networks.ts';
import { json, type HttpHandler } from '../http/server.ts';
import { withdrawDeadline } from '../schemes/batch-settlement/cumulative.ts';
import type { ChannelLedger } from './channel-ledger.ts';
import type { ChannelRecord } from './channel-record.ts';
import { CHANNEL_ID, type ChannelView } from './channel-view-type.ts';

export type { ChannelView } from './channel-view-type.ts';

/** The public view of a channel record. Pure. */
export function channelView(r: ChannelRecord, token?: { symbol: string; decimals: number }): ChannelView {
  const balance = BigInt(r.balance);
  const spent = BigInt(r.charged);
  const deadline = withdrawDeadline(r, r.config.withdrawDelay);
  return {
    channelId: r.channelId,
    network: r.network,
    payer: r.config.payer,
    receiver: r.config.receiver,
    token: r.config.token,
    ...(token ? { symbol: token.symbol, decimals: token.decimals } : {}),
    withdrawDelay: r.config.withdrawDelay,
    balance: balance.toString(),
    spent: spent.toString(),
    remaining: (balance > spent ? balance - spent : 0n).toString(),
    claimed: r.totalClaimed,
    ...(deadline === undefined ? {} : { withdrawal: { requestedAt: r.withdrawRequestedAt, finalizableAt: deadline } }),
    updatedAt: r.at,
  };
}

export function channelViewHandler(ledger: Pick<ChannelLedger, 'read'>, networks: Pick<NetworkRegistry, 'stablecoinOn'>): HttpHandler {
  const noStore = { 'cache-control': 'no-store' };
  return async (req) => {
    const id = req.params.channelId ?? '';
    if (!CHANNEL_ID.test(id)) return json(400, { error: 'a channel id is 0x and 64 hex digits' }, noStore);
    const held = await ledger.read(id as Hex);
    if (!held) return json(404, { error: 'this gateway holds no record of that channel' }, noStore);
    const r = held.record;
    return json(200, { channel: channelView(r, networks.stablecoinOn(r.network, r.config.token)) }, noStore);
  };
}
