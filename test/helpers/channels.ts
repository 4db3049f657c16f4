/**
 * Payment-channel (`batch-settlement`) helpers of the facilitator's tests: offers as a merchant makes them, the
 * official client's payloads, the official facilitator reading the same chain, and channel reads.
 */
import { BatchSettlementEvmScheme as OfficialClient } from '@x402/evm/batch-settlement/client';
import { BatchSettlementEvmScheme as OfficialFacilitator } from '@x402/evm/batch-settlement/facilitator';
import { keccak256, toHex, type Address, type Hex } from 'viem';
import type { LocalAccount, PrivateKeyAccount } from 'viem/accounts';
import { BATCH_SETTLEMENT_ADDRESS } from '../../src/chain/canonical.ts';
import type { NetworkEntry } from '../../src/chain/network-types.ts';
import { batchSettlementAbi } from '../../src/schemes/batch-settlement/abi.ts';
import { batchSettlementRequirements, type BatchSettlementRequirements } from '../../src/schemes/batch-settlement/requirements.ts';
import { clientsFor, freshAccount } from './devnet.ts';

export interface Merchant {
  receiver: Address;
  authorizer: PrivateKeyAccount;
}

export const newMerchant = (): Merchant => ({ receiver: freshAccount().address, authorizer: freshAccount() });
export const randomSalt = (): Hex => keccak256(toHex(`${Math.random()}-${process.hrtime.bigint()}`));

export function offerOn(n: NetworkEntry, merchant: Merchant, opts: { price: bigint; deposit: bigint; method: 'eip3009' | 'permit2' }): BatchSettlementRequirements {
  const r = batchSettlementRequirements({
    network: `eip155:${n.chainId}`,
    asset: n.stablecoin.address,
    payTo: merchant.receiver,
    price: opts.price,
    maxTimeoutSeconds: 300,
    receiverAuthorizer: merchant.authorizer.address,
    withdrawDelay: 900,
    tokenName: n.stablecoin.name,
    tokenVersion: n.stablecoin.version,
    assetTransferMethod: opts.method,
    minDeposit: opts.deposit,
  });
  if (!r.ok) throw new Error(r.error.message);
  return r.value;
}

/** The official client of `payer` for one channel salt, reading the chain for channels it does not remember. */
export function officialChannelClient(n: NetworkEntry, payer: LocalAccount, salt: Hex = randomSalt()): OfficialClient {
  const { pub } = clientsFor(n, payer);
  const signer = {
    address: payer.address,
    signTypedData: (message: Parameters<LocalAccount['signTypedData']>[0]) => payer.signTypedData(message),
    readContract: (args: Parameters<typeof pub.readContract>[0]) => pub.readContract(args),
  };
  return new OfficialClient(signer as never, { salt });
}

/** The official client's payment payload (the whole envelope) for `offer`. */
export async function officialChannelPayment(
  client: OfficialClient,
  offer: BatchSettlementRequirements,
): Promise<{ x402Version: 2; accepted: BatchSettlementRequirements; payload: Record<string, unknown> }> {
  const made = await client.createPaymentPayload(2, offer as never);
  return { x402Version: 2, accepted: offer, payload: made.payload as Record<string, unknown> };
}

/** The official facilitator reading `n` (verify only: it is never asked to send). */
export function officialChannelFacilitator(n: NetworkEntry): OfficialFacilitator {
  const { pub } = clientsFor(n, freshAccount());
  const refuse = () => Promise.reject(new Error('this facilitator only verifies'));
  const signer = {
    getAddresses: () => [freshAccount().address],
    readContract: (args: never) => pub.readContract(args),
    verifyTypedData: (args: never) => pub.verifyTypedData(args),
    getCode: (args: { address: Address }) => pub.getCode(args),
    writeContract: refuse,
    sendTransaction: refuse,
    waitForTransactionReceipt: refuse,
  };
  return new OfficialFacilitator(signer as never);
}

export async function channelOnChain(n: NetworkEntry, channelId: Hex): Promise<{ balance: bigint; totalClaimed: bigint }> {
  const [balance, totalClaimed] = await clientsFor(n, freshAccount()).pub.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'channels', args: [channelId] });
  return { balance, totalClaimed };
}
