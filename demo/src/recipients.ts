import type { Policy } from 'postguard-ts/worker';
import { EMAIL, MOBILE } from './attributes.js';

/**
 * From the encrypt form's recipient rows to the encryption policy: one entry per recipient, keyed
 * by e-mail address (the convention pg-js follows), with the e-mail attribute and any extra
 * attributes as required values. Problems are reported per field so the form can point at them.
 */

export interface RecipientInput {
  email: string;
  extras: Array<{ type: string; value: string }>;
}

export interface FieldProblem {
  /** Recipient row (0-based). */
  row: number;
  /** 'email', or the index of the extra attribute. */
  field: 'email' | number;
  message: string;
}

export type PolicyResult = { ok: true; policy: Record<string, Policy> } | { ok: false; problems: FieldProblem[] };

const EMAIL_SHAPE = /^[^\s@]+@[^\s@]+\.[^\s@.]+$/;

/** Values as the wallet would disclose them: phone numbers without spaces or dashes. */
export function normalizeValue(type: string, value: string): string {
  const trimmed = value.trim();
  return type === MOBILE ? trimmed.replace(/[\s()-]/g, '') : trimmed;
}

export function encryptionPolicy(rows: readonly RecipientInput[], ts: number, emailType = EMAIL): PolicyResult {
  const problems: FieldProblem[] = [];
  const policy: Record<string, Policy> = {};
  if (rows.length === 0)
    return { ok: false, problems: [{ row: 0, field: 'email', message: 'Add at least one recipient.' }] };
  rows.forEach((row, i) => {
    const email = row.email.trim();
    if (email === '') {
      problems.push({ row: i, field: 'email', message: "Enter the recipient's e-mail address." });
      return;
    }
    if (!EMAIL_SHAPE.test(email)) {
      problems.push({ row: i, field: 'email', message: `"${email}" is not an e-mail address.` });
      return;
    }
    if (Object.hasOwn(policy, email)) {
      problems.push({ row: i, field: 'email', message: `${email} is listed twice.` });
      return;
    }
    const con = [{ t: emailType, v: email }];
    const seen = new Set<string>([emailType]);
    row.extras.forEach((extra, j) => {
      const value = normalizeValue(extra.type, extra.value);
      if (value === '') problems.push({ row: i, field: j, message: 'Enter a value or remove this attribute.' });
      else if (seen.has(extra.type))
        problems.push({ row: i, field: j, message: 'This attribute is already required for this recipient.' });
      else {
        seen.add(extra.type);
        con.push({ t: extra.type, v: value });
      }
    });
    policy[email] = { ts, con };
  });
  return problems.length === 0 ? { ok: true, policy } : { ok: false, problems };
}

/** Seconds since the epoch, rounded down: a key request at this time is never "in the future". */
export const policyTimestamp = (nowMs = Date.now()): number => Math.floor(nowMs / 1000);
