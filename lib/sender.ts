import type { Policy } from './policy.js';
import type { VerificationResult } from './signatures.js';

/**
 * What may be said about a file's sender, in words that never claim more than the signatures
 * proved. The demo, the CLI and the service worker's client all show a sender through this one
 * table, so the wording is the same everywhere and is tested once per threat-model row
 * (docs/security.md).
 *
 * From strongest to weakest:
 * - `verified`: a current (bound) file whose content the public identity signed.
 * - `content-signer`: the content was signed by the private identity; the public one is a claim
 *   of the signed header, which the content signature does not cover.
 * - `older-format`: an unbound file (pg-wasm 0.5.x, pg-js 1.x) signed by its public identity.
 * - `claimed`: nothing of the content checked yet (before unsealing, or a range of segments).
 */
export type SenderStanding = 'verified' | 'content-signer' | 'older-format' | 'claimed';

/** One identity and what it was shown to be: `label` is the exact wording people read. */
export interface SenderLine {
  /** How to introduce this identity, e.g. "Verified sender" (from {@link SENDER_WORDING}). */
  label: string;
  /** The identity: its attributes and values. */
  policy: Policy;
}

/**
 * How to present a file's sender: what `senderReport` and `claimedSenderReport` return. Show the
 * headline, explanation and lines as they are rather than wording the result yourself.
 */
export interface SenderReport {
  /** How much the signatures proved, strongest first (see {@link SenderStanding}). */
  standing: SenderStanding;
  /** A few words for a badge or a heading. */
  headline: string;
  /** One sentence on what was proved, to follow the headline. */
  explanation: string;
  /** The identities, the one the content signature proves first. */
  lines: SenderLine[];
  /** Set when a line carries a demo-scheme attribute: such credentials prove nothing about a person. */
  demoCredentials: boolean;
}

/** The exact words shown for a sender, one per standing and role, shared by every surface. */
export const SENDER_WORDING = {
  verified: 'Verified sender',
  contentSigner: 'Content signed by',
  headerClaim: 'Claimed in the signed header (not part of the content signature)',
  olderHeaderClaim: 'Signed header, older format (not part of the content signature)',
  olderFormat: 'Signed header, older format',
  claimed: 'Claimed sender',
  rangeClaimed: 'Claimed sender (checked only once the whole file is read)',
  demoCredentials: 'Demo credentials: anyone can issue these to themselves, so they prove nothing about a person.',
} as const;

/** Yivi's demo scheme: its credentials can be issued by anyone, to anyone. */
export const DEMO_SCHEME_PREFIX = 'irma-demo.';

/** Whether an attribute type is from Yivi's demo scheme, which proves nothing about a person. */
export const isDemoCredential = (type: string): boolean => type.startsWith(DEMO_SCHEME_PREFIX);

const hasDemoCredential = (lines: readonly SenderLine[]): boolean =>
  lines.some((line) => line.policy.con.some((a) => isDemoCredential(a.t)));

/** The sentence that follows each standing's headline (and a range's) to say what was proved. */
export const SENDER_EXPLANATION: Record<SenderStanding | 'range', string> = {
  verified: 'The content and the header were signed by this sender, who is also sealed inside the encryption.',
  'content-signer':
    'The content was signed by the identity below. The sender named in the header did not sign the content: anyone who could open this file could have written it under that header.',
  'older-format':
    'An older PostGuard version made this file: this sender signed it, but is not sealed inside the encryption.',
  claimed: 'The file names this sender; it is checked only when the whole file has been decrypted.',
  range: 'The parts shown are intact and unchanged; who sent them is checked only once the whole file is read.',
};

const report = (
  standing: SenderStanding,
  headline: string,
  explanation: string,
  lines: SenderLine[],
): SenderReport => ({ standing, headline, explanation, lines, demoCredentials: hasDemoCredential(lines) });

/** The sender of a file that was unsealed to its end (every signature verified). */
export function senderReport(result: VerificationResult): SenderReport {
  const W = SENDER_WORDING;
  if (result.contentSigner === 'private' && result.private !== undefined) {
    return report('content-signer', W.contentSigner, SENDER_EXPLANATION['content-signer'], [
      { label: W.contentSigner, policy: result.private },
      { label: result.bound ? W.headerClaim : W.olderHeaderClaim, policy: result.public },
    ]);
  }
  if (result.bound) {
    return report('verified', W.verified, SENDER_EXPLANATION.verified, [{ label: W.verified, policy: result.public }]);
  }
  return report('older-format', W.olderFormat, SENDER_EXPLANATION['older-format'], [
    { label: W.olderFormat, policy: result.public },
  ]);
}

/**
 * The sender a header names, before its content was checked: after `Unsealer.new` or a detached
 * header (`header`), or after a range of segments was authenticated without the signatures
 * (`range`).
 */
export function claimedSenderReport(claimed: Policy, seen: 'header' | 'range' = 'header'): SenderReport {
  const label = seen === 'range' ? SENDER_WORDING.rangeClaimed : SENDER_WORDING.claimed;
  return report('claimed', SENDER_WORDING.claimed, SENDER_EXPLANATION[seen === 'range' ? 'range' : 'claimed'], [
    { label, policy: claimed },
  ]);
}

/** Readable names of the attribute types PostGuard senders and recipients commonly use. */
export const ATTRIBUTE_NAMES: Readonly<Record<string, string>> = {
  'pbdf.sidn-pbdf.email.email': 'E-mail address',
  'pbdf.sidn-pbdf.email.domain': 'E-mail domain',
  'pbdf.sidn-pbdf.mobilenumber.mobilenumber': 'Mobile number',
  'pbdf.gemeente.personalData.fullname': 'Full name',
  'pbdf.gemeente.personalData.surname': 'Surname',
  'pbdf.gemeente.personalData.dateofbirth': 'Date of birth',
  'pbdf.pbdf.kvk.displayName': 'Organisation',
  'pbdf.pbdf.kvk.kvkNumber': 'Chamber of Commerce number',
};

/**
 * A readable name for an attribute type ({@link ATTRIBUTE_NAMES}; an unknown type shows its last
 * part). A demo-scheme type says so: "E-mail address (demo credential)" never reads like the real one.
 */
export function attributeName(type: string): string {
  const lastPart = (t: string) => {
    const last = t.split('.').pop() ?? t;
    return last === '' ? t : last;
  };
  if (isDemoCredential(type)) {
    const real = ATTRIBUTE_NAMES[`pbdf.${type.slice(DEMO_SCHEME_PREFIX.length)}`];
    return `${real ?? lastPart(type)} (demo credential)`;
  }
  return ATTRIBUTE_NAMES[type] ?? lastPart(type);
}

/** One attribute of a sender line, ready to show. */
export interface SenderTextAttribute {
  /** The attribute type, e.g. `pbdf.sidn-pbdf.email.email`. */
  type: string;
  /** Its readable name ({@link attributeName}), e.g. "E-mail address". */
  name: string;
  /** Its value ("(any value)" when the identity names none). */
  value: string;
  /** The attribute as one piece of text, in the style asked for. */
  text: string;
}

/** One identity of a sender report, ready to show: its label and its attributes. */
export interface SenderTextLine {
  /** How the identity is introduced, e.g. "Verified sender" ({@link SENDER_WORDING}). */
  label: string;
  /** Its attributes. */
  attributes: SenderTextAttribute[];
  /** The whole line: `Verified sender: alice@example.org`. */
  text: string;
}

/** A sender report as text: what `senderText` returns. */
export interface SenderText {
  /** A few words for a badge or a heading ({@link SenderReport.headline}). */
  headline: string;
  /** One sentence on what was proved. */
  explanation: string;
  /** One per identity, the one the content signature proves first. */
  lines: SenderTextLine[];
  /** The demo-credentials warning, when a line carries one; show it beside the lines. */
  note: string | undefined;
  /** Everything above but the headline and explanation as plain text: one line per identity, then the note. */
  text: string;
}

/** How `senderText` words attributes. */
export interface SenderTextOptions {
  /**
   * `'names'` (default, for people): "E-mail address: alice@example.org", and a line shows an
   * e-mail address alone (not a demo credential's, which keeps its name). `'types'` (for logs and terminals): `pbdf.sidn-pbdf.email.email = "alice@example.org"`.
   */
  attributes?: 'names' | 'types';
}

const isEmailType = (type: string): boolean => type.endsWith('.email.email');

/**
 * A sender report ({@link senderReport}, {@link claimedSenderReport}, `inspect().sender`,
 * `decrypt().sender`) as text an app can show as it is: the headline, the explanation, a line per
 * identity with its label, and the demo-credentials note. It words nothing more strongly than the
 * report does: the labels are the report's.
 */
export function senderText(report: SenderReport, options: SenderTextOptions = {}): SenderText {
  const names = (options.attributes ?? 'names') === 'names';
  const lines = report.lines.map((line): SenderTextLine => {
    const attributes = line.policy.con.map(({ t, v }): SenderTextAttribute => {
      const name = attributeName(t);
      const value = v ?? '(any value)';
      const type = isDemoCredential(t) ? `${t} (demo credential)` : t;
      const text = names
        ? `${name}: ${value}`
        : v === undefined
          ? `${type} (any value)`
          : `${type} = ${JSON.stringify(v)}`;
      return { type: t, name, value, text };
    });
    const shown =
      attributes.length === 0
        ? '(no attributes)'
        : attributes
            .map((a) => (names && isEmailType(a.type) && !isDemoCredential(a.type) ? a.value : a.text))
            .join(', ');
    return { label: line.label, attributes, text: `${line.label}: ${shown}` };
  });
  const note = report.demoCredentials ? SENDER_WORDING.demoCredentials : undefined;
  const text = [...lines.map((l) => l.text), ...(note === undefined ? [] : [`Note: ${note}`])].join('\n');
  return { headline: report.headline, explanation: report.explanation, lines, note, text };
}
