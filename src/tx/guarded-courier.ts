/**
 * A courier whose signatures and sends ask `guard` first, on top of whatever its relayer pool already asks: a role
 * one node plays at a time (the channel claimer) signs and sends through the engine's shared relayers only while it
 * holds the role's lease. Nothing is signed or sent once the guard refuses ({@link NotSigning}); counting a
 * transaction in or out of flight (`adopt`, `done`, `abandon`) still passes.
 */
import type { Courier } from './courier.ts';
import { NotSigning, type RelayerPool, type SigningGuard } from './relayer-pool.ts';

const SIGNING = new Set<PropertyKey>(['sign', 'bump', 'broadcast']);

export function guardedCourier(courier: Courier, guard: SigningGuard): Courier {
  const pool = new Proxy(courier.pool, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      if (!SIGNING.has(prop)) return value.bind(target);
      return (...args: unknown[]) => {
        const why = guard();
        return why === undefined ? value.apply(target, args) : Promise.reject(new NotSigning(why));
      };
    },
  }) as RelayerPool;
  return { ...courier, pool };
}
