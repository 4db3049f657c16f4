/**
 * What a measured actor can report, read from its machine's definition: the transitions `watchActor` counts
 * (`from` -> `to`, both as {@link statePath} names them, `start` for the first state), the states it times, and its
 * final states. The metrics initialise these series at zero, so a dashboard or an alert sees them before the first
 * event.
 */
import type { AnyStateMachine, AnyStateNode, StateValue } from 'xstate';

export interface MachineSeries {
  transitions: Array<[from: string, to: string]>;
  /** Non-final states an actor rests in (transient ones, left by `always` before anyone sees them, are not). */
  states: string[];
  finals: string[];
}

const name = (node: AnyStateNode) => node.path.join('.');

function leaves(node: AnyStateNode): AnyStateNode[] {
  const children = Object.values(node.states) as AnyStateNode[];
  return children.length === 0 ? [node] : children.flatMap(leaves);
}

/** The leaves an actor rests in after entering `node`: its initial descent, and through transient (`always`) states. */
function restingAfter(node: AnyStateNode, seen = new Set<AnyStateNode>()): AnyStateNode[] {
  if (seen.has(node)) return [];
  seen.add(node);
  if (node.type === 'compound') return (node.initial?.target ?? []).flatMap((t: AnyStateNode) => restingAfter(t, seen));
  if (node.type !== 'atomic' && node.type !== 'final') return [];
  const always = node.always ?? [];
  if (always.length === 0) return [node];
  const through = always.flatMap((t) => (t.target ?? []).flatMap((target: AnyStateNode) => restingAfter(target, seen)));
  // Only an unguarded `always` is sure to be taken; with guards alone, the state may be where the actor stays.
  return always.some((t) => t.guard === undefined) ? through : [node, ...through];
}

/** Ancestors first, the leaf last: every node whose transitions apply while the actor is in `leaf`. */
function lineage(leaf: AnyStateNode): AnyStateNode[] {
  const nodes: AnyStateNode[] = [];
  for (let n: AnyStateNode | undefined = leaf; n; n = n.parent) nodes.unshift(n);
  return nodes;
}

/** Parallel states are not read (no measured machine has one): their regions would be joined names. */
export function machineSeries(machine: AnyStateMachine): MachineSeries {
  const resting = new Set(restingAfter(machine.root));
  const pending = [...resting];
  const transitions = new Map<string, [string, string]>();
  const add = (from: string, to: AnyStateNode) => {
    if (from !== name(to)) transitions.set(`${from}\n${name(to)}`, [from, name(to)]);
  };
  for (const first of resting) add('start', first);
  const visited = new Set<AnyStateNode>();
  for (let leaf = pending.pop(); leaf; leaf = pending.pop()) {
    if (visited.has(leaf) || leaf.type === 'final') continue;
    visited.add(leaf);
    for (const node of lineage(leaf)) {
      for (const defs of node.transitions.values()) {
        for (const def of defs) {
          for (const target of (def.target ?? []) as AnyStateNode[]) {
            for (const next of restingAfter(target)) {
              add(name(leaf), next);
              pending.push(next);
            }
          }
        }
      }
    }
  }
  const all = leaves(machine.root);
  return {
    transitions: [...transitions.values()],
    states: [...visited].map(name),
    finals: all.filter((n) => n.type === 'final').map(name),
  };
}

/** `inFlight.confirming` for `{inFlight: 'confirming'}`; parallel regions joined with `,`. */
export function statePath(value: StateValue): string {
  if (typeof value === 'string') return value;
  return Object.entries(value)
    .map(([k, v]) => (v === undefined || (typeof v === 'object' && Object.keys(v).length === 0) ? k : `${k}.${statePath(v)}`))
    .join(',');
}
