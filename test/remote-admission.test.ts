// Remote settlement's own backpressure, at its door: settles past the bounds are answered `settlement_shed` (503,
// nothing charged) without a call to the facilitator, even when nobody asked `shedding` first; a payment already
// in flight is answered by its settlement, never turned away for the place it holds; a network without facilitators
// is the local port's, its shedding too. The facilitator is a real HTTP server that holds what it gets; the local
// port and the chain-free checks are given as the composition root gives them, here as plain functions.
import t from 'tap';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CAIP2 } from '../src/chain/canonical.ts';
import { createLogger } from '../src/log/logger.ts';
import { createMetrics } from '../src/metrics/metrics.ts';
import { SETTLEMENT_SHED, type Settlement, type Shed } from '../src/ports/settlement.ts';
import { ok } from '../src/protocol/result.ts';
import type { VerifyRequest } from '../src/protocol/x402/types.ts';
import { remoteAdmissionFromEnv } from '../src/settlement/remote/facilitators-config.ts';
import { RemoteAdmission } from '../src/settlement/remote/remote-admission.ts';
import { remoteSettlement } from '../src/settlement/remote/remote-settlement.ts';
import { freshAccount, network, testDevnet } from './helpers/devnet.ts';
import { officialPayment, requirementsFor } from './helpers/payments.ts';

const manifest = testDevnet();
const REMOTE = CAIP2.base;
const LOCAL = CAIP2.baseSepolia;

t.test('the counts: bounded per network and per client, a place released once, nothing kept at zero', async (t) => {
  const admission = new RemoteAdmission({ maxInFlight: 3, clientMaxInFlight: 2, retryAfterSeconds: 1 });
  const a1 = admission.enter(REMOTE, 'a');
  const a2 = admission.enter(REMOTE, 'a');
  t.same(admission.enter(REMOTE, 'a'), { shed: { reason: 'client_share', retryAfterSeconds: 1 } }, 'a client at its share');
  t.ok('ticket' in admission.enter(LOCAL, 'a'), 'another network counts apart');
  const b1 = admission.enter(REMOTE, 'b');
  t.same(admission.shedding(REMOTE, 'c'), { reason: 'queue_full', retryAfterSeconds: 1 }, 'the network at its bound');
  if (!('ticket' in a1) || !('ticket' in a2) || !('ticket' in b1)) throw new Error('places expected');
  a1.ticket.release();
  a1.ticket.release();
  t.equal(admission.inFlight, 3, 'released once, however often its holder says so');
  t.equal(admission.shedding(REMOTE, 'a'), undefined, 'room again, for the client too');
  a2.ticket.release();
  b1.ticket.release();
  t.same(remoteAdmissionFromEnv({}), { maxInFlight: 128, clientMaxInFlight: 16, retryAfterSeconds: 1 }, 'safe defaults');
  t.same(remoteAdmissionFromEnv({ GATE402_SETTLE_REMOTE_MAX: '4' }).clientMaxInFlight, 2, 'a client share of at least 2 by default');
  t.throws(() => remoteAdmissionFromEnv({ GATE402_SETTLE_REMOTE_MAX: '0' }), /GATE402_SETTLE_REMOTE_MAX/);
});

t.test('at the door of settle: past the bound nothing is called; a duplicate joins its settlement', async (t) => {
  const held: ServerResponse[] = [];
  let settles = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/settle') settles++;
      held.push(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const localShed: Shed = { reason: 'relayers_busy', retryAfterSeconds: 7 };
  const localCalls: string[] = [];
  const local: Settlement = {
    verify: async () => ({ isValid: true }),
    settle: async (request) => {
      localCalls.push(request.paymentRequirements.network);
      return { success: true, transaction: `0x${'1'.repeat(64)}`, network: request.paymentRequirements.network };
    },
    shedding: async () => localShed,
    supported: () => ({ kinds: [], extensions: [], signers: {} }),
  };
  const metrics = createMetrics({ defaultMetrics: false });
  const remote = remoteSettlement({
    config: {
      networks: new Map([[REMOTE, [{ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, name: 'hanging' }]]]),
      timeoutMs: 60_000,
      connectTimeoutMs: 3000,
      breaker: { threshold: 3, openMs: 30_000 },
      admission: { maxInFlight: 2, clientMaxInFlight: 2, retryAfterSeconds: 3 },
    },
    local,
    precheck: async () => ok({ signedByKey: true }),
    consumption: async () => ({ consumed: false }),
    log: createLogger('test', { level: 'error' }),
    metrics,
  });
  t.teardown(async () => {
    for (const res of held.splice(0)) res.writeHead(400).end();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await remote.close();
  });
  const payment = async (caip2: string = REMOTE): Promise<VerifyRequest> => {
    const accepted = requirementsFor(caip2, network(manifest, caip2), freshAccount().address, '10000');
    const payload = await officialPayment(freshAccount(), accepted);
    return { x402Version: 2, paymentPayload: payload, paymentRequirements: accepted } as VerifyRequest;
  };

  const first = await payment();
  const running = [remote.settle(first, 'a'), remote.settle(await payment(), 'b')];
  while (settles < 2) await new Promise((r) => setTimeout(r, 20));
  t.equal(remote.inFlight, 2, 'two remote settlements in flight');
  const third = await remote.settle(await payment(), 'c');
  t.equal(third.success, false);
  t.equal(third.errorReason, SETTLEMENT_SHED, 'turned away at the door, nobody having asked `shedding` first');
  t.same(third.extra, { reason: 'queue_full', retryAfterSeconds: 3 });
  t.equal(settles, 2, 'the facilitator was not called for it');
  t.equal(await remote.shedding(first, 'a'), undefined, 'a payment in flight is not shed when it comes again');
  const duplicate = remote.settle(first, 'a');
  t.equal(remote.inFlight, 2, 'and joins its settlement: no new place, no new call');
  t.same(await remote.shedding(await payment(LOCAL), 'a'), localShed, 'a network without facilitators sheds as the local port says');
  t.equal((await remote.settle(await payment(LOCAL), 'a')).success, true, 'and is settled by it');
  t.same(localCalls, [LOCAL]);
  for (const res of held.splice(0)) res.writeHead(400).end();
  const [a, b] = await Promise.all(running);
  t.equal((await duplicate).errorReason, a?.errorReason, 'the duplicate got its settlement’s answer');
  t.equal(b?.success, false);
  t.equal(remote.inFlight, 0, 'every place given back');
  t.equal(settles, 2, 'two payments, two calls');
});
