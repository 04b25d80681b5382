import { AuthenticationError, FormatError, InputError, PostGuardError, type ErrorCode } from '../lib/errors.js';
import { PkgClientError, type PkgClientErrorCode } from '../lib/pkg/errors.js';

/**
 * Errors across realms (page ↔ worker ↔ service worker). Structured clone keeps an Error's name
 * and message but drops its class and its `code`, so errors travel as plain objects and are
 * rebuilt on the other side as the same class with the same code.
 */

const MARK = '__postguardError' as const;

export interface WireError {
  [MARK]: 1;
  /** Which class to rebuild. */
  kind: 'PostGuardError' | 'FormatError' | 'AuthenticationError' | 'InputError' | 'PkgClientError' | 'Error';
  name: string;
  message: string;
  code?: string;
  stack?: string;
  status?: number;
  serverCode?: string;
  retryAfter?: number;
  url?: string;
  cause?: unknown;
}

/** Whether `value` is an error sent across realms by `encodeError` (rebuild it with `reviveError`). */
export const isWireError = (value: unknown): value is WireError =>
  typeof value === 'object' && value !== null && (value as Record<string, unknown>)[MARK] === 1;

/** How deep a chain of causes is carried. */
const MAX_CAUSE_DEPTH = 3;

function kindOf(error: Error): WireError['kind'] {
  if (error instanceof PkgClientError) return 'PkgClientError';
  if (error instanceof FormatError) return 'FormatError';
  if (error instanceof AuthenticationError) return 'AuthenticationError';
  if (error instanceof InputError) return 'InputError';
  if (error instanceof PostGuardError) return 'PostGuardError';
  return 'Error';
}

/**
 * A cloneable form of `value`: Errors become WireErrors (with code and cause); anything else is
 * returned as is when structured clone can carry it, or as its string otherwise.
 */
export function encodeError(value: unknown, depth = 0): unknown {
  if (value instanceof Error) {
    const wire: WireError = { [MARK]: 1, kind: kindOf(value), name: value.name, message: value.message };
    if (value.stack !== undefined) wire.stack = value.stack;
    const code = (value as { code?: unknown }).code;
    if (typeof code === 'string') wire.code = code;
    if (value instanceof PkgClientError) {
      if (value.status !== undefined) wire.status = value.status;
      if (value.serverCode !== undefined) wire.serverCode = value.serverCode;
      if (value.retryAfter !== undefined) wire.retryAfter = value.retryAfter;
      if (value.url !== undefined) wire.url = value.url;
    }
    if (value.cause !== undefined && depth < MAX_CAUSE_DEPTH) wire.cause = encodeError(value.cause, depth + 1);
    return wire;
  }
  if (value === undefined || value === null || typeof value !== 'object') {
    return typeof value === 'function' || typeof value === 'symbol' ? String(value) : value;
  }
  try {
    structuredClone(value);
    return value;
  } catch {
    return String(value);
  }
}

/** The error `value` stood for: a WireError rebuilt as its class, anything else unchanged. */
export function reviveError(value: unknown): unknown {
  if (!isWireError(value)) return value;
  const cause = value.cause === undefined ? undefined : reviveError(value.cause);
  const options = cause === undefined ? undefined : { cause };
  let error: Error;
  switch (value.kind) {
    case 'PkgClientError':
      error = new PkgClientError(value.code as PkgClientErrorCode, value.message, {
        ...(cause === undefined ? {} : { cause }),
        ...(value.status === undefined ? {} : { status: value.status }),
        ...(value.serverCode === undefined ? {} : { serverCode: value.serverCode }),
        ...(value.retryAfter === undefined ? {} : { retryAfter: value.retryAfter }),
        ...(value.url === undefined ? {} : { url: value.url }),
      });
      break;
    case 'FormatError':
      error = new FormatError(value.code as ErrorCode, value.message, options);
      break;
    case 'AuthenticationError':
      error = new AuthenticationError(value.code as ErrorCode, value.message, options);
      break;
    case 'InputError':
      error = new InputError(value.code as ErrorCode, value.message, options);
      break;
    case 'PostGuardError':
      error = new PostGuardError(value.code as ErrorCode, value.message, options);
      break;
    default:
      error = new Error(value.message, options);
      error.name = value.name;
      if (value.code !== undefined) (error as { code?: string }).code = value.code;
  }
  // The stack where it was thrown (in the other realm) says more than the one where it was rebuilt.
  if (value.stack !== undefined) error.stack = value.stack;
  return error;
}
