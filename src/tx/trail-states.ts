/**
 * The sub-states every machine that sends a signed transaction shares (a settlement batch, a channel claim and its
 * sweep, a channel refund): while it is signed and written down (`signing`, then `signed` once the first version of
 * its trail is recorded), and while it waits for its receipt (`waiting`, then `replaced` once a repriced version
 * joined the trail). Each trail event whose trail grows is recorded by `action`; the machine names its own event,
 * guard and action (a claim's sweep has a trail of its own).
 */

interface TrailNames<E extends string, G extends string, A extends string> {
  event: E;
  guard: G;
  action: A;
}

const DEFAULT_NAMES = { event: 'trail', guard: 'grows', action: 'growTrail' } as const;

function grows<E extends string, G extends string, A extends string, T extends string | undefined>(n: TrailNames<E, G, A>, target: T) {
  const transition = target === undefined ? { guard: n.guard, actions: n.action } : { guard: n.guard, target, actions: n.action };
  return { on: { [n.event]: transition } as Record<E, { guard: G; actions: A } & (T extends string ? { target: T } : object)> };
}

/** `signing` until the trail's first version is recorded, then `signed` (each later version recorded too). */
export function signingTrail<E extends string = 'trail', G extends string = 'grows', A extends string = 'growTrail'>(names?: TrailNames<E, G, A>) {
  const n = (names ?? DEFAULT_NAMES) as TrailNames<E, G, A>;
  return { initial: 'signing' as const, states: { signing: grows(n, 'signed' as const), signed: grows(n, undefined) } };
}

/** `waiting` for the receipt until a repriced version joins the trail, then `replaced`. */
export function minedTrail<E extends string = 'trail', G extends string = 'grows', A extends string = 'growTrail'>(names?: TrailNames<E, G, A>) {
  const n = (names ?? DEFAULT_NAMES) as TrailNames<E, G, A>;
  return { initial: 'waiting' as const, states: { waiting: grows(n, 'replaced' as const), replaced: grows(n, undefined) } };
}
