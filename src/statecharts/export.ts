/**
 * Statecharts from the machines themselves: an XState machine config as JSON (what `createMachine` and Stately's
 * tools read; implementations are referred to by name, functions are left out) and a Mermaid `stateDiagram-v2` that
 * GitHub renders. `npm run statecharts` writes both for every machine of `machines.ts`; a test fails when the
 * committed files differ from what the code exports.
 */
import type { AnyStateMachine, AnyStateNode, AnyTransitionDefinition } from 'xstate';

export interface ChartedMachine {
  /** File name stem under `statecharts/`, e.g. `payment`. */
  name: string;
  /** Where the machine is defined, for the reader. */
  source: string;
  machine: AnyStateMachine;
}

/** A guard as a label: a named guard, its params, or the name of an inline function. */
function guardLabel(guard: unknown): string | undefined {
  if (guard === undefined) return undefined;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'function') return guard.name || 'inline';
  if (guard !== null && typeof guard === 'object' && 'type' in guard) {
    const { type, params } = guard as { type: unknown; params?: unknown };
    const args = params !== null && typeof params === 'object' ? Object.values(params).map(String).join(', ') : params === undefined ? '' : String(params);
    return args ? `${String(type)}(${args})` : String(type);
  }
  return 'inline';
}

/** The machine's config as plain JSON: functions become their action type (`xstate.assign`) or guard name, or go. */
function plain(value: unknown, key = ''): unknown {
  if (typeof value === 'function') {
    if (key === 'guard') return guardLabel(value);
    const type = (value as { type?: unknown }).type;
    return typeof type === 'string' ? { type } : undefined;
  }
  if (Array.isArray(value)) return value.map((v) => plain(v)).filter((v) => v !== undefined);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const p = plain(v, k);
      if (p !== undefined) out[k] = p;
    }
    return out;
  }
  return value;
}

export function statechartJson(machine: AnyStateMachine): string {
  return `${JSON.stringify(plain(machine.config), null, 2)}\n`;
}

const mermaidId = (node: AnyStateNode) => node.path.join('_');

/** What moves a transition, in words: `verify done`, `confirm error`, `after confirmDeadline`, or the event. */
function triggerLabel(node: AnyStateNode, eventType: string): string {
  for (const [prefix, word] of [
    ['xstate.done.actor.', 'done'],
    ['xstate.error.actor.', 'error'],
  ] as const) {
    if (eventType.startsWith(prefix)) {
      const invoked = node.invoke.find((i) => i.id === eventType.slice(prefix.length));
      const src = invoked === undefined ? 'actor' : typeof invoked.src === 'string' ? invoked.src : invoked.id;
      return `${src} ${word}`;
    }
  }
  const delayed = node.after.find((t) => t.eventType === eventType);
  if (delayed) return `after ${typeof delayed.delay === 'function' ? 'delay' : String(delayed.delay)}`;
  return eventType;
}

function edges(node: AnyStateNode, indent: string, lines: string[]): void {
  const from = mermaidId(node);
  /** One arrow per target; an unguarded transition after guarded ones for the same trigger is their `[else]`. */
  const draw = (ts: readonly AnyTransitionDefinition[], trigger: string | undefined) => {
    for (const t of ts) {
      const g = guardLabel(t.guard) ?? (ts.length > 1 ? 'else' : undefined);
      const label = [trigger, g === undefined ? undefined : `[${g}]`].filter(Boolean).join(' ');
      for (const target of t.target ?? []) lines.push(`${indent}${from} --> ${mermaidId(target)}${label ? `: ${label}` : ''}`);
    }
  };
  draw(node.always ?? [], undefined);
  for (const [eventType, ts] of node.transitions) draw(ts, triggerLabel(node, eventType));
  if (node.type === 'final') lines.push(`${indent}${from} --> [*]`);
}

function block(parent: AnyStateNode, indent: string, lines: string[]): void {
  const children = Object.values(parent.states) as AnyStateNode[];
  for (const child of children) if (mermaidId(child) !== child.key) lines.push(`${indent}state "${child.key}" as ${mermaidId(child)}`);
  for (const target of parent.initial?.target ?? []) lines.push(`${indent}[*] --> ${mermaidId(target)}`);
  for (const child of children) {
    const id = mermaidId(child);
    for (const invoked of child.invoke) lines.push(`${indent}${id} : invokes ${typeof invoked.src === 'string' ? invoked.src : invoked.id}`);
    if (Object.keys(child.states).length > 0) {
      lines.push(`${indent}state ${id} {`);
      block(child, `${indent}  `, lines);
      lines.push(`${indent}}`);
    }
  }
  for (const child of children) edges(child, indent, lines);
}

export function statechartMermaid(machine: AnyStateMachine): string {
  const lines = ['stateDiagram-v2'];
  block(machine.root, '  ', lines);
  return lines.join('\n');
}

/** The two files of one machine, by file name. */
export function statechartFiles(chart: ChartedMachine): Record<string, string> {
  const markdown = [
    `# The ${chart.name} statechart`,
    '',
    `Exported from [\`${chart.source}\`](../${chart.source}) by \`npm run statecharts\`; do not edit by hand (a test compares this file with the code). The same chart as an XState machine config: [\`${chart.name}.json\`](${chart.name}.json).`,
    '',
    'States that run a step say `invokes <step>`; `<step> done [guard]` is the step finishing with the guard true, `[else]` the fallback when no guard before it held.',
    '',
    '```mermaid',
    statechartMermaid(chart.machine),
    '```',
    '',
  ].join('\n');
  return { [`${chart.name}.json`]: statechartJson(chart.machine), [`${chart.name}.md`]: markdown };
}
