import { PkgError } from '../errors.js';

/**
 * Demo schemes: Yivi's `irma-demo` scheme has credentials that anyone can issue to themselves (the
 * issuer keys are public, for trying things out). An identity proven with them proves nothing, so
 * a production PKG can refuse them (`--refuse-demo-schemes`): at session start, from the attributes
 * the client asks for, and again at key issuance, from what the session JWT says was disclosed
 * (a JWT may come from a session this PKG did not start).
 */

export const DEMO_SCHEMES: readonly string[] = ['irma-demo'];

/** Whether an attribute (or credential) type id lies in a demo scheme. */
export const isDemoType = (type: string): boolean => DEMO_SCHEMES.some((scheme) => type.startsWith(`${scheme}.`));

/** Throws DEMO_SCHEME_REFUSED if any of the types lies in a demo scheme. */
export function refuseDemoTypes(types: Iterable<string>): void {
  for (const type of types) if (isDemoType(type)) throw new PkgError('DEMO_SCHEME_REFUSED');
}
