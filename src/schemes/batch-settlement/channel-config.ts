import { hashTypedData, type Address, type Hex } from 'viem';
import { batchSettlementDomain } from './domain.ts';

/**
 * A channel's immutable terms. The payer fills `payer`, `payerAuthorizer` (an EOA that signs vouchers, or the zero
 * address to have the payer sign, EIP-1271 included) and `salt`; the rest comes from the 402 offer (`payTo`,
 * `extra.receiverAuthorizer`, `asset`, `extra.withdrawDelay`).
 */
export interface ChannelConfig {
  payer: Address;
  payerAuthorizer: Address;
  receiver: Address;
  receiverAuthorizer: Address;
  token: Address;
  /** Seconds (uint40), within the scheme's bounds. */
  withdrawDelay: number;
  salt: Hex;
}

/** EIP-712 types of {@link ChannelConfig}, in the contract's field order. */
export const channelConfigTypes = {
  ChannelConfig: [
    { name: 'payer', type: 'address' },
    { name: 'payerAuthorizer', type: 'address' },
    { name: 'receiver', type: 'address' },
    { name: 'receiverAuthorizer', type: 'address' },
    { name: 'token', type: 'address' },
    { name: 'withdrawDelay', type: 'uint40' },
    { name: 'salt', type: 'bytes32' },
  ],
} as const;

/**
 * The channel id: the EIP-712 hash of the config under the scheme's domain on `chainId`, as the contract's
 * `getChannelId` computes it. Lower-case hex, so equal ids are equal strings.
 */
export function channelIdOf(config: ChannelConfig, chainId: number): Hex {
  return hashTypedData({
    domain: batchSettlementDomain(chainId),
    types: channelConfigTypes,
    primaryType: 'ChannelConfig',
    message: { ...config },
  }).toLowerCase() as Hex;
}

/** The config as the contract's `ChannelConfig` tuple argument (viem encodes `withdrawDelay` as uint40 from a number). */
export function channelConfigArg(config: ChannelConfig): ChannelConfig {
  return { ...config };
}
