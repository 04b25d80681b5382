import { describe, expect, it } from 'vitest';
import { SENDER_WORDING, attributeName, claimedSenderReport, senderReport, senderText } from './sender.js';

/** senderText: a sender report as the text an app shows, with the report's own labels. */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const alice = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'alice@example.org' }] };

describe('senderText', () => {
  it('a verified sender: one line, the e-mail address alone, for people', () => {
    const text = senderText(senderReport({ public: alice, bound: true, contentSigner: 'public' }));
    expect(text.headline).toBe(SENDER_WORDING.verified);
    expect(text.text).toBe('Verified sender: alice@example.org');
    expect(text.lines).toEqual([
      {
        label: 'Verified sender',
        attributes: [
          {
            type: EMAIL,
            name: 'E-mail address',
            value: 'alice@example.org',
            text: 'E-mail address: alice@example.org',
          },
        ],
        text: 'Verified sender: alice@example.org',
      },
    ]);
    expect(text.note).toBeUndefined();
  });

  it('never words more than the report: a claim stays a claim, a content signer names both identities', () => {
    expect(senderText(claimedSenderReport(alice, 'range')).text).toBe(
      `${SENDER_WORDING.rangeClaimed}: alice@example.org`,
    );
    const mobile = { ts: 1, con: [{ t: 'pbdf.sidn-pbdf.mobilenumber.mobilenumber', v: '+31612345678' }] };
    const text = senderText(senderReport({ public: alice, private: mobile, bound: true, contentSigner: 'private' }));
    expect(text.text).toBe(
      [
        `${SENDER_WORDING.contentSigner}: Mobile number: +31612345678`,
        `${SENDER_WORDING.headerClaim}: alice@example.org`,
      ].join('\n'),
    );
    expect(text.text).not.toContain(SENDER_WORDING.verified);
  });

  it('demo credentials keep their name on the line and bring the note', () => {
    const demo = { ts: 1, con: [{ t: 'irma-demo.sidn-pbdf.email.email', v: 'alice@example.org' }] };
    const text = senderText(senderReport({ public: demo, bound: true, contentSigner: 'public' }));
    expect(text.text).toBe(
      `Verified sender: E-mail address (demo credential): alice@example.org\nNote: ${SENDER_WORDING.demoCredentials}`,
    );
    expect(text.note).toBe(SENDER_WORDING.demoCredentials);
  });

  it("'types': the attribute types and quoted values, for logs and pg-cli", () => {
    const text = senderText(claimedSenderReport({ ts: 1, con: [{ t: EMAIL, v: 'a"b@example.org' }, { t: 'x.y.z' }] }), {
      attributes: 'types',
    });
    expect(text.text).toBe(`Claimed sender: ${EMAIL} = "a\\"b@example.org", x.y.z (any value)`);
    expect(senderText(claimedSenderReport({ ts: 1, con: [] })).text).toBe('Claimed sender: (no attributes)');
  });

  it('attributeName: known names, a demo twin, the last part of anything else', () => {
    expect(attributeName(EMAIL)).toBe('E-mail address');
    expect(attributeName('irma-demo.sidn-pbdf.mobilenumber.mobilenumber')).toBe('Mobile number (demo credential)');
    expect(attributeName('pbdf.other.cred.favouriteColour')).toBe('favouriteColour');
  });
});
