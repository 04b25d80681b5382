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
  rangeClaimed: 'Claimed sender (segments authenticated, sender not verified)',
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
  range:
    'Every part shown was authenticated under the file’s key; the sender is checked only by reading the whole file.',
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
