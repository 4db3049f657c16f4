import { startRpcRelay, type RpcCall } from './rpc-relay.ts';

/**
 * A JSON-RPC relay between a service under test and a chain, that can hold the calls a predicate picks until it is
 * told to let them through: a slow or stalled node, made on purpose, to stop a service at a chosen step. Everything
 * else passes straight through.
 */
export interface RpcGate {
  url: string;
  /** Calls matching `pick` wait from now on, until `release`; `held` counts those waiting. */
  hold(pick: (call: RpcCall) => boolean): void;
  release(): void;
  readonly held: number;
  /**
   * From now on each answer the chain gives passes `inspect` before it goes back (undefined: none is inspected); the
   * answer waits while `inspect` runs, so a test can act between the chain's answer and the service's next step.
   */
  inspect(fn: ((calls: RpcCall[] | undefined, answer: string) => Promise<void> | void) | undefined): void;
  close(): Promise<void>;
}

export async function startRpcGate(upstream: string): Promise<RpcGate> {
  let pick: ((call: RpcCall) => boolean) | undefined;
  let waiting: Array<() => void> = [];
  let inspector: ((calls: RpcCall[] | undefined, answer: string) => Promise<void> | void) | undefined;
  const relay = await startRpcRelay(() => upstream, {
    async beforeForward(calls) {
      if (pick && calls?.some((c) => pick!(c))) await new Promise<void>((resolve) => waiting.push(resolve));
    },
    async afterForward(calls, answer) {
      if (inspector) await inspector(calls, answer.toString('utf8'));
    },
  });
  const release = () => {
    pick = undefined;
    const go = waiting;
    waiting = [];
    for (const resolve of go) resolve();
  };
  return {
    url: relay.origin,
    hold(p) {
      pick = p;
    },
    release,
    inspect(fn) {
      inspector = fn;
    },
    get held() {
      return waiting.length;
    },
    async close() {
      release();
      await relay.close();
    },
  };
}
