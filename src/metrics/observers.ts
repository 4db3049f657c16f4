/**
 * The observers the metrics hand to the parts they measure, typed here so that the metrics depend on no part: a part
 * accepting an observer declares the same function type (the chain clients' `RpcObserver`, the HTTP server's
 * `ResponseObserver`), and TypeScript checks the two agree where the composition root connects them.
 */

/** Told of every JSON-RPC call a chain client makes. */
export type RpcObserver = (method: string, seconds: number, failed: boolean) => void;

/** Told of every HTTP response a server writes: its route template, method, status and duration. */
export type ResponseObserver = (route: string, method: string, status: number, seconds: number) => void;
