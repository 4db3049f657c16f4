// The refund's rules as pure functions, no chain: how much a refund returns and when it is refused (the spec's reason,
// before anything is signed), the channel's hold taken and released, and the one transaction's calls in order.
import { SAMPLE_CHANNEL, SAMPLE_CONFIG, SAMPLE_SIGNATURE } from './support/channel-fixture.ts';
import t from 'tap';
import { decodeFunctionData, type Hex } from 'viem';
import { openedRecord, refundEnded, withRefunding } from '../src/channels/channel-record.ts';
import { refundFinished, RefundRefusal, type RefundRecord } from '../src/channels/refund-machine.ts';
import { decideRefund, refundCallData } from '../src/channels/refund-steps.ts';
import { batchSettlementAbi } from '../src/schemes/batch-settlement/abi.ts';
import { BatchReason } from '../src/verify/batch-settlement-reasons.ts';

const CHANNEL = SAMPLE_CHANNEL;
const CONFIG = SAMPLE_CONFIG;
const SIG = SAMPLE_SIGNATURE;
const chain = (balance: bigint, totalClaimed = 0n) => ({ balance, totalClaimed, withdrawRequestedAt: 0, refundNonce: 3n });

function refusal(f: () => unknown): string | undefined {
  try {
    f();
    return undefined;
  } catch (error) {
    return error instanceof RefundRefusal ? error.reason : `not a refusal: ${String(error)}`;
  }
}

t.test('what a refund returns, and each refusal with the reason the official client reads', async (t) => {
  t.equal(decideRefund(chain(1_000n), 300n, undefined, 50n), 700n, 'no amount: everything left after what was charged');
  t.equal(decideRefund(chain(1_000n, 100n), 300n, 200n, 50n), 200n, 'a partial refund at least the minimum');
  t.equal(decideRefund(chain(1_000n), 990n, 10n, 50n), 10n, 'below the minimum but exactly what is left: taken');
  t.equal(decideRefund(chain(1_000n, 400n), 300n, undefined, 50n), 600n, 'claimed beyond the charge (another server): the chain caps it');
  t.equal(
    refusal(() => decideRefund(chain(0n), 0n, undefined, 50n)),
    BatchReason.refundNoBalance,
    'an empty channel: refund_no_balance',
  );
  t.equal(
    refusal(() => decideRefund(chain(500n, 500n), 500n, undefined, 50n)),
    BatchReason.refundNoBalance,
    'all of it charged: refund_no_balance',
  );
  t.equal(
    refusal(() => decideRefund(chain(1_000n), 300n, 701n, 50n)),
    BatchReason.refundAmountInvalid,
    'above what is left: refund_amount_invalid',
  );
  t.equal(
    refusal(() => decideRefund(chain(1_000n), 300n, 49n, 50n)),
    BatchReason.refundAmountInvalid,
    'a partial refund below the minimum: refund_amount_invalid',
  );
  t.equal(
    refusal(() => decideRefund(chain(200n), 300n, undefined, 50n)),
    BatchReason.cumulativeExceedsBalance,
    'charged beyond the balance (a withdrawal took it): nothing to claim with it',
  );
});

t.test("the channel's hold: taken for one refund, released by it alone, stale once its record is closed", async (t) => {
  const r = { ...openedRecord({ channelId: CHANNEL, network: 'eip155:8453', config: CONFIG, balance: 1_000n, totalClaimed: 0n, now: 1 }), version: 4 };
  const held = withRefunding(r, 'refund-a', 2);
  t.same([held.refunding, held.version], [{ id: 'refund-a', since: 2 }, 5], 'held, one version on');
  t.equal(refundEnded(held, 'refund-b', undefined, 3), held, 'another refund cannot release it');
  const released = refundEnded(held, 'refund-a', chain(300n, 300n), 3);
  t.same([released.refunding, released.balance, released.totalClaimed, released.refundNonce, released.version], [undefined, '300', '300', '3', 6], "released with the chain's view, one version on");
  t.same(refundEnded(held, 'refund-a', undefined, 3).version, 6, 'released without a chain read');
  t.equal(refundFinished('stalled'), false, 'a stalled refund is resumed');
  t.equal(refundFinished('refunded') && refundFinished('refused') && refundFinished('reverted') && refundFinished('failed'), true, 'the others are finished');
});

t.test('one transaction: the claim, the sweep (when the claim credits anything), then the refund for its nonce', async (t) => {
  const record: RefundRecord = {
    id: 'r',
    network: 'eip155:8453',
    channelId: CHANNEL,
    config: CONFIG,
    voucher: { maxClaimableAmount: '300', signature: SIG },
    state: 'preparing',
    txs: [],
    createdAt: 0,
    updatedAt: 0,
  };
  const calls = (sweep: boolean) => {
    const data = refundCallData({ record, claimSignature: SIG, sweep, amount: 700n, nonce: 3n, refundSignature: SIG });
    const outer = decodeFunctionData({ abi: batchSettlementAbi, data });
    t.equal(outer.functionName, 'multicall');
    return ((outer.args as readonly unknown[])[0] as Hex[]).map((call) => decodeFunctionData({ abi: batchSettlementAbi, data: call }));
  };
  const all = calls(true);
  t.same(
    all.map((c) => c.functionName),
    ['claimWithSignature', 'settle', 'refundWithSignature'],
    'claim before settle before refund',
  );
  const refund = all[2]?.args as readonly unknown[];
  t.same([refund[1], refund[2]], [700n, 3n], "the refund's amount and nonce as signed");
  t.same(
    calls(false).map((c) => c.functionName),
    ['claimWithSignature', 'refundWithSignature'],
    'nothing newly claimed: no sweep',
  );
});
