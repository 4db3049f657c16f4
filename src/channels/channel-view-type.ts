/**
 * The public view of a payment channel (`GET /api/channels/:channelId`), shared by the gateway that writes it and the
 * marketplace page that reads it: types and the id's pattern only, nothing that needs Node.
 */
import type { Hex } from 'viem';

/** A channel id: 0x and 64 hex digits. */
export const CHANNEL_ID = /^0x[0-9a-fA-F]{64}$/;

/** Amounts are decimal strings of the token's atomic units. */
export interface ChannelView {
  channelId: Hex;
  network: string;
  payer: string;
  receiver: string;
  token: string;
  /** The token's symbol and decimals, when it is the network's configured stablecoin. */
  symbol?: string;
  decimals?: number;
  withdrawDelay: number;
  /** The channel's balance on chain as last read: every deposit, less what refunds returned to the payer. */
  balance: string;
  /** What the gateway has charged: the served requests' cumulative amount. */
  spent: string;
  /** What vouchers can still pay: balance − spent (none after a refund of the rest). */
  remaining: string;
  /** What was claimed on chain so far (part of `spent`). */
  claimed: string;
  /** A payer's withdrawal: when it was initiated and when it can be finalized (unix seconds), if one is pending. */
  withdrawal?: { requestedAt: number; finalizableAt: number };
  /** Unix ms of the record's last change. */
  updatedAt: number;
}
