/** Types of node-support.mjs (plain JavaScript: it runs before tsx). */
export declare const SUPPORTED_NODE: ReadonlyArray<{ readonly major: number; readonly minor: number }>;
export declare function enginesRange(): string;
export declare function unsupportedNodeMessage(version: string): string | undefined;
