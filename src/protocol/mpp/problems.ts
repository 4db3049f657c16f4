/**
 * RFC 9457 problem details for MPP errors (`Content-Type: application/problem+json`), with the type
 * URIs and titles mppx 0.11 uses (`Errors.js`). Every code is status 402 (sent with a fresh challenge)
 * except `method-unsupported`, which is 400.
 */
import type { Problem, ProblemCode } from './types.ts';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
export const PROBLEM_BASE = 'https://paymentauth.org/problems/';

const PROBLEMS: Readonly<Record<ProblemCode, { title: string; status: 402 | 400 }>> = {
  'payment-required': { title: 'Payment Required', status: 402 },
  'payment-insufficient': { title: 'Payment Insufficient', status: 402 },
  'payment-expired': { title: 'Payment Expired', status: 402 },
  'verification-failed': { title: 'Verification Failed', status: 402 },
  'malformed-credential': { title: 'Malformed Credential', status: 402 },
  'invalid-challenge': { title: 'Invalid Challenge', status: 402 },
  'method-unsupported': { title: 'Method Unsupported', status: 400 },
};

export const PROBLEM_CODES = Object.keys(PROBLEMS) as ProblemCode[];

/** The problem body; `challengeId` (the fresh challenge sent alongside) is omitted when undefined. */
export function problemJson(code: ProblemCode, detail: string, challengeId?: string): Problem {
  const { title, status } = PROBLEMS[code];
  return {
    type: `${PROBLEM_BASE}${code}`,
    title,
    status,
    detail,
    ...(challengeId !== undefined && { challengeId }),
  };
}
