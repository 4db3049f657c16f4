// Voucher signatures checked natively (the project's keccak and libsecp256k1), against viem's typed-data hashing and
// signing: the same digest and signer for random vouchers and the edges of uint128; and what the settlement contract
// would refuse to claim is refused here too (v other than 27/28, high s), so a voucher is never served unclaimable.
import t from 'tap';
import { hashTypedData, type Hex, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { MAX_UINT128 } from '../src/schemes/batch-settlement/domain.ts';
import { recoverVoucherSigner, voucherDigestBytes, voucherTypedData } from '../src/schemes/batch-settlement/voucher.ts';

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const randomId = () => toHex(crypto.getRandomValues(new Uint8Array(32)));

t.test('the digest is the EIP-712 one viem computes, and the signer is recovered', async (t) => {
  const payer = privateKeyToAccount(generatePrivateKey());
  const amounts = [0n, 1n, 10_000n, MAX_UINT128 - 1n, MAX_UINT128, ...Array.from({ length: 40 }, () => BigInt(toHex(crypto.getRandomValues(new Uint8Array(16)))))];
  let same = 0;
  let recovered = 0;
  for (const [i, maxClaimableAmount] of amounts.entries()) {
    const chainId = [8453, 84532, 4663][i % 3] as number;
    const voucher = { channelId: randomId(), maxClaimableAmount };
    if (toHex(voucherDigestBytes(voucher, chainId) as Uint8Array) === hashTypedData(voucherTypedData(voucher, chainId))) same += 1;
    const signature = await payer.signTypedData(voucherTypedData(voucher, chainId));
    if (recoverVoucherSigner({ ...voucher, signature }, chainId) === payer.address) recovered += 1;
  }
  t.equal(same, amounts.length, `the digest of all ${amounts.length} vouchers matches viem's`);
  t.equal(recovered, amounts.length, 'and each recovers to its payer');
  t.equal(voucherDigestBytes({ channelId: randomId(), maxClaimableAmount: MAX_UINT128 + 1n }, 8453), undefined, 'an amount beyond uint128 has no digest');
  t.equal(voucherDigestBytes({ channelId: '0x1234' as Hex, maxClaimableAmount: 1n }, 8453), undefined, 'nor a short channel id');
});

t.test('signatures the contract would not claim with are refused', async (t) => {
  const payer = privateKeyToAccount(generatePrivateKey());
  const voucher = { channelId: randomId(), maxClaimableAmount: 20_000n };
  const signature = await payer.signTypedData(voucherTypedData(voucher, 8453));
  const r = signature.slice(2, 66);
  const s = BigInt(`0x${signature.slice(66, 130)}`);
  const v = Number.parseInt(signature.slice(130), 16);
  t.equal(recoverVoucherSigner({ ...voucher, signature }, 8453), payer.address, 'as signed (v 27 or 28): valid');
  const parity = (v - 27).toString(16).padStart(2, '0');
  t.equal(
    recoverVoucherSigner({ ...voucher, signature: `0x${r}${s.toString(16).padStart(64, '0')}${parity}` as Hex }, 8453),
    undefined,
    'the same with v as a parity (0 or 1): refused, ecrecover takes 27/28 only',
  );
  const highS = `0x${r}${(N - s).toString(16).padStart(64, '0')}${(v === 27 ? 28 : 27).toString(16)}` as Hex;
  t.equal(recoverVoucherSigner({ ...voucher, signature: highS }, 8453), undefined, 'its high-s twin: refused');
  const compact = `0x${r}${((BigInt(v - 27) << 255n) | s).toString(16).padStart(64, '0')}` as Hex;
  t.equal(recoverVoucherSigner({ ...voucher, signature: compact }, 8453), payer.address, 'the EIP-2098 compact form (64 bytes), which the contract splits: valid');
  for (const bad of ['0x', '0x1234', `${signature}00`, signature.replace(/^0x/, '0y'), 42 as unknown as string]) {
    t.equal(recoverVoucherSigner({ ...voucher, signature: bad as Hex }, 8453), undefined, `malformed ${String(bad).slice(0, 12)}: refused`);
  }
});
