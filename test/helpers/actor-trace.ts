import { statePath } from '../../src/metrics/metrics.ts';
import { createActor, toPromise, type AnyStateMachine, type InputFrom, type SnapshotFrom, type StateValue } from 'xstate';

/**
 * Runs `machine` from `input` to its end (or until `until` holds) and returns every state it passed through, in
 * order, with its last snapshot. Steps are whatever the machine was provided with: fakes in a unit test.
 */
export async function trace<M extends AnyStateMachine>(machine: M, input: InputFrom<M>, until?: (snapshot: SnapshotFrom<M>) => boolean): Promise<{ states: string[]; snapshot: SnapshotFrom<M> }> {
  const actor = createActor(machine, { input });
  const states: string[] = [];
  let stopAt: () => void = () => {};
  const reached = new Promise<void>((resolve) => (stopAt = resolve));
  actor.subscribe((snapshot: SnapshotFrom<M>) => {
    const path = statePath((snapshot as { value: StateValue }).value);
    if (states.at(-1) !== path) states.push(path);
    if (until?.(snapshot)) stopAt();
  });
  actor.start();
  await Promise.race([toPromise(actor).catch(() => undefined), reached]);
  const snapshot = actor.getSnapshot() as SnapshotFrom<M>;
  actor.stop();
  return { states, snapshot };
}
