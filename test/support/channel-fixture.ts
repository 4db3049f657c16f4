/** A channel of no chain, for the pure tests of channel records and refunds: its id, config and a signature's shape. */
import type { Hex } from 'viem';

export const SAMPLE_CHANNEL = `0x${'ab'.repeat(32)}` as Hex;
export const SAMPLE_CONFIG = {
  payer: '0x00000000000000000000000000000000000000a1',
  payerAuthorizer: '0x00000000000000000000000000000000000000a1',
  receiver: '0x00000000000000000000000000000000000000b2',
  receiverAuthorizer: '0x00000000000000000000000000000000000000c3',
  token: '0x00000000000000000000000000000000000000d4',
  withdrawDelay: 900,
  salt: `0x${'00'.repeat(32)}`,
} as const;
export const SAMPLE_SIGNATURE = `0x${'11'.repeat(65)}` as Hex;
