import type { Address, Hex } from 'viem';
import { writeAddressWord, writeBytes32, writeUint256 } from '../../verify/signature/bytes.ts';
import { domainSeparator, keccakBytes } from '../../verify/signature/digest.ts';
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

const CONFIG_TYPEHASH = keccakBytes(
  new TextEncoder().encode('ChannelConfig(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)'),
);
/** `typeHash ‖ the seven fields`, then `0x1901 ‖ separator ‖ structHash`: scratch, everything here is synchronous. */
const STRUCT = new Uint8Array(32 * 8);
const STRUCT_VIEW = new DataView(STRUCT.buffer);
const FINAL = new Uint8Array(66);
STRUCT.set(CONFIG_TYPEHASH, 0);
FINAL[0] = 0x19;
FINAL[1] = 0x01;
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/**
 * The channel id: the EIP-712 hash of the config under the scheme's domain on `chainId`, as the contract's
 * `getChannelId` computes it (by the project's keccak and cached domain separators: the gateway derives it for every
 * voucher). Lower-case hex, so equal ids are equal strings. Throws on a config that is not one (a parsed payload's
 * always is).
 */
export function channelIdOf(config: ChannelConfig, chainId: number): Hex {
  const written =
    writeAddressWord(config.payer, STRUCT, 32) &&
    writeAddressWord(config.payerAuthorizer, STRUCT, 64) &&
    writeAddressWord(config.receiver, STRUCT, 96) &&
    writeAddressWord(config.receiverAuthorizer, STRUCT, 128) &&
    writeAddressWord(config.token, STRUCT, 160) &&
    Number.isInteger(config.withdrawDelay) &&
    config.withdrawDelay >= 0 &&
    config.withdrawDelay < 2 ** 40 &&
    writeUint256(config.withdrawDelay, STRUCT_VIEW, 192) &&
    writeBytes32(config.salt, STRUCT, 224);
  if (!written) throw new TypeError('not a channel config');
  FINAL.set(domainSeparator(batchSettlementDomain(chainId)), 2);
  FINAL.set(keccakBytes(STRUCT), 34);
  const id = keccakBytes(FINAL);
  let hex = '0x';
  for (const b of id) hex += HEX[b];
  return hex as Hex;
}

/** The config as the contract's `ChannelConfig` tuple argument (viem encodes `withdrawDelay` as uint40 from a number). */
export function channelConfigArg(config: ChannelConfig): ChannelConfig {
  return { ...config };
}
