import { PkgError } from '../errors.js';

/**
 * Yivi session tokens are 20 characters from [A-Za-z0-9]. The PKG checks a token before it puts it
 * into an upstream URL, so nothing a client sends can change the path or query of that request.
 */
export const SESSION_TOKEN_PATTERN = /^[A-Z0-9]{20}$/i;

export function checkSessionToken(token: string): string {
  if (!SESSION_TOKEN_PATTERN.test(token)) throw new PkgError('SESSION_TOKEN');
  return token;
}
