import { pbkdf2Sync } from 'node:crypto';
import { HDKey, hdKeyToAccount, type HDAccount } from 'viem/accounts';

/**
 * DEVNET ONLY. anvil's well-known public test mnemonic: every key derived from it is public knowledge and must
 * never hold value on a real network.
 */
export const DEVNET_TEST_MNEMONIC = 'test test test test test test test test test test test junk';

/**
 * Which HD index plays which role on the devnet. anvil funds indices below `fundedAccounts` with native gas;
 * the gasless buyer and the merchants sit above it on purpose, so they start with no native balance.
 */
export const DEVNET_ROLES = {
  fundedAccounts: 40,
  deployer: 0,
  relayers: [1, 2, 3, 4],
  buyers: [5, 6, 7, 8, 9, 10, 11, 12],
  /** The stock desk: receives stock-buy payments, swaps, refunds and sponsors gas. */
  stockDesk: 13,
  /**
   * Funded, minters of every devnet stablecoin, never used by the service: tests take one each. Those at or above
   * `fundedAccounts` get their gas from the deployment (anvil_setBalance), so the gasless roles below stay gasless.
   */
  testers: [20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98],
  gaslessBuyer: 45,
  merchants: [50, 51, 52, 53],
} as const;

const cache = new Map<number, HDAccount>();
let master: HDKey | undefined;

/** The BIP-39 seed (PBKDF2-SHA512, 2048 rounds, salt "mnemonic"), computed once with Node's native crypto. */
function masterKey(): HDKey {
  master ??= HDKey.fromMasterSeed(pbkdf2Sync(DEVNET_TEST_MNEMONIC.normalize('NFKD'), 'mnemonic', 2048, 64, 'sha512'));
  return master;
}

/** The devnet account at an HD index (m/44'/60'/0'/0/index) of the test mnemonic. */
export function devnetAccount(index: number): HDAccount {
  let account = cache.get(index);
  if (!account) {
    account = hdKeyToAccount(masterKey(), { addressIndex: index });
    cache.set(index, account);
  }
  return account;
}

export function devnetPrivateKey(index: number): `0x${string}` {
  const key = devnetAccount(index).getHdKey().privateKey;
  if (!key) throw new Error(`no private key at index ${index}`);
  return `0x${Buffer.from(key).toString('hex')}`;
}

/** The first `count` private keys of the public test mnemonic (m/44'/60'/0'/0/0 on), lower-case hex, quickly. */
export function devnetPrivateKeys(count: number): string[] {
  const parent = masterKey().derive("m/44'/60'/0'/0");
  return Array.from({ length: count }, (_, i) => {
    const key = parent.deriveChild(i).privateKey;
    if (!key) throw new Error(`no private key at index ${i}`);
    return `0x${Buffer.from(key).toString('hex')}`;
  });
}

/** How many keys of the public mnemonic are recognised as public (the devnet uses indices up to 91). */
export const PUBLIC_MNEMONIC_KEYS_CHECKED = 100;
let publicKeys: Set<string> | undefined;

/** True when `key` is one of the public test mnemonic's first {@link PUBLIC_MNEMONIC_KEYS_CHECKED} keys: anyone can derive it. */
export function isPublicTestKey(key: string): boolean {
  publicKeys ??= new Set(devnetPrivateKeys(PUBLIC_MNEMONIC_KEYS_CHECKED));
  return publicKeys.has(key.trim().toLowerCase());
}
