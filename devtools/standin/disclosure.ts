import type { NormalizedAttributeRequest } from './request.js';
import { satisfies } from './protocol.js';
import type { DisclosedAttribute, ProofStatus, SimulatedAttribute } from './protocol.js';

/**
 * Checking a simulated disclosure against the request, with irmago's matching rules
 * (AttributeConDisCon.Satisfy and Disclosure.DisclosedAttributes), minus the cryptography:
 *
 * - there must be a set for every disjunction, else nothing matches;
 * - set i satisfies disjunction i if one of its conjunctions, tried in order, is satisfied by the set's
 *   first attributes; the empty conjunction is only satisfied by an empty set (irmamobile#360);
 * - an unsatisfied disjunction yields `null` and MISSING_ATTRIBUTES (the session still ends DONE);
 * - sets beyond the last disjunction were not asked for: they come back as one trailing EXTRA group.
 */

export const WEEK_SECONDS = 604_800;

/** Credential signing dates are stored with a granularity of one week. */
export const roundDownToWeek = (t: number): number => Math.floor(t / WEEK_SECONDS) * WEEK_SECONDS;

export interface DisclosureOutcome {
  proofStatus: ProofStatus;
  /** Undefined where irmago's result has no `disclosed` (nil slice, omitted from JSON). */
  disclosed: (DisclosedAttribute[] | null)[] | undefined;
}

export function disclosedAttribute(attr: SimulatedAttribute, issuancetime: number, extra = false): DisclosedAttribute {
  // A 3-part id names a whole credential; disclosing it discloses the value "present".
  const rawvalue = attr.id.split('.').length === 3 ? 'present' : attr.rawvalue;
  return {
    rawvalue,
    value: rawvalue === null ? null : { '': rawvalue, en: rawvalue, nl: rawvalue },
    id: attr.id,
    status: extra ? 'EXTRA' : rawvalue === null ? 'NULL' : 'PRESENT',
    issuancetime,
  };
}

function satisfyCon(con: NormalizedAttributeRequest[], set: SimulatedAttribute[]): boolean {
  if (con.length === 0) return set.length === 0;
  if (set.length < con.length) return false;
  return con.every((ar, j) => {
    const attr = set[j]!;
    const value = attr.id.split('.').length === 3 ? 'present' : attr.rawvalue;
    return satisfies(ar, attr.id, value);
  });
}

export function evaluateDisclosure(
  disclose: NormalizedAttributeRequest[][][],
  sets: SimulatedAttribute[][],
  issuancetime: number,
): DisclosureOutcome {
  let list: (DisclosedAttribute[] | null)[] | undefined;
  let complete = false;
  if (sets.length >= disclose.length) {
    complete = true;
    list = disclose.map((discon, i) => {
      const set = sets[i]!;
      const con = discon.find((c) => satisfyCon(c, set));
      if (con === undefined) {
        complete = false;
        return null;
      }
      return set.slice(0, con.length).map((attr) => disclosedAttribute(attr, issuancetime));
    });
  }

  const extra = sets
    .slice(disclose.length)
    .flat()
    .map((attr) => disclosedAttribute(attr, issuancetime, true));
  if (extra.length > 0) list = [...(list ?? []), extra];
  return { proofStatus: complete ? 'VALID' : 'MISSING_ATTRIBUTES', disclosed: list };
}
