import { encodeDeployData, type Abi, type Account, type Address, type Chain, type Hex, type PublicClient, type TransactionReceipt, type Transport, type WalletClient } from 'viem';
import { publicClientFor, walletClientFor } from '../chain/clients.ts';
import { receiptOf } from './receipt.ts';

/**
 * eth_estimateGas finds the least gas with which a call succeeds, which calls with nested callbacks (a Uniswap mint
 * paying from its callback) can miss by the 1/64 every call withholds: sent with the bare estimate they sometimes run
 * out of gas. 30% more, as wallets add.
 */
const withHeadroom = (estimate: bigint): bigint => (estimate * 13n) / 10n;

/** Sends one account's transactions to a local chain, each awaited to its receipt and checked for success. */
export class Submitter {
  readonly wallet: WalletClient<Transport, Chain, Account>;
  readonly client: PublicClient<Transport, Chain>;

  constructor(chainId: number, rpcUrl: string, account: Account) {
    this.client = publicClientFor(chainId, rpcUrl, { pollingIntervalMs: 10 });
    this.wallet = walletClientFor(chainId, rpcUrl, account, { pollingIntervalMs: 10 });
  }

  get address(): Address {
    return this.wallet.account.address;
  }

  async deploy(artifact: { abi: Abi | readonly unknown[]; bytecode: Hex }, args: readonly unknown[] = []): Promise<Address> {
    const data = encodeDeployData({ abi: artifact.abi as Abi, bytecode: artifact.bytecode, args: args as unknown[] });
    const gas = withHeadroom(await this.client.estimateGas({ account: this.wallet.account, data }));
    const hash = await this.wallet.sendTransaction({ data, gas });
    const receipt = await this.#confirm(hash, 'deploy');
    if (!receipt.contractAddress) throw new Error(`deploy ${hash} created no contract`);
    return receipt.contractAddress;
  }

  async call(address: Address, abi: Abi | readonly unknown[], functionName: string, args: readonly unknown[] = []): Promise<TransactionReceipt> {
    const request = { address, abi: abi as Abi, functionName, args: args as unknown[] };
    const gas = withHeadroom(await this.client.estimateContractGas({ ...request, account: this.wallet.account }));
    const hash = await this.wallet.writeContract({ ...request, gas });
    return this.#confirm(hash, functionName);
  }

  async #confirm(hash: Hex, what: string): Promise<TransactionReceipt> {
    // Asked for directly, with a wide bound: viem's 30 s wait failed 3 of 10 bench devnet starts at a load average of 20.
    const receipt = await receiptOf(this.client, hash, { pollMs: 10 });
    if (receipt.status !== 'success') throw new Error(`${what} reverted on chain ${this.client.chain.id}: ${hash}`);
    return receipt;
  }
}
