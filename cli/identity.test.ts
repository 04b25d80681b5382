import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hidePolicy } from '../lib/policy.js';
import { CliError, Exit } from './exit.js';
import {
  defaultValue,
  describePolicy,
  hiddenValue,
  matchesHint,
  parseAttrs,
  parseRecipients,
  parseSignId,
  signingDisclosure,
} from './identity.js';

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const DOMAIN = 'pbdf.sidn-pbdf.email.domain';
const MOBILE = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';

/** The usage error a parse throws (exit 2), as its message. */
function usageMessage(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).exitCode).toBe(Exit.USAGE);
    return (error as CliError).message;
  }
  throw new Error('expected a usage error');
}

describe('parseRecipients (-i)', () => {
  it("takes pg-cli's shape and the spec's {t, con} entries", () => {
    const parsed = parseRecipients(
      JSON.stringify({
        'bob@example.org': [{ t: EMAIL, v: 'bob@example.org' }],
        'carol@example.org': {
          t: 1_700_000_000,
          con: [
            { t: EMAIL, v: 'carol@example.org' },
            { t: MOBILE, v: '+31612345678' },
          ],
        },
        'dave@example.org': { con: [{ t: EMAIL, v: 'dave@example.org' }] },
      }),
    );
    expect([...parsed.policies]).toEqual([
      ['bob@example.org', [{ t: EMAIL, v: 'bob@example.org' }]],
      [
        'carol@example.org',
        [
          { t: EMAIL, v: 'carol@example.org' },
          { t: MOBILE, v: '+31612345678' },
        ],
      ],
      ['dave@example.org', [{ t: EMAIL, v: 'dave@example.org' }]],
    ]);
  });

  it('refuses what no key could open: a recipient with no attributes, an attribute without a value', () => {
    expect(usageMessage(() => parseRecipients('{"anyone": []}'))).toBe(
      '--identity: recipient "anyone" has no attributes: name at least one (e.g. an e-mail address)',
    );
    expect(usageMessage(() => parseRecipients(JSON.stringify({ 'bob@example.org': [{ t: EMAIL }] })))).toBe(
      `--identity: recipient "bob@example.org"[0] needs "v": no key the PKG issues opens a file sealed for any value of ${EMAIL}`,
    );
  });

  it('refuses every malformed shape with a message naming the place', () => {
    expect(usageMessage(() => parseRecipients('{'))).toMatch(/^--identity: not valid JSON \(/);
    expect(usageMessage(() => parseRecipients('[]'))).toBe(
      '--identity: must be a JSON object mapping recipient ids to attribute arrays, not an array',
    );
    expect(usageMessage(() => parseRecipients('null'))).toMatch(/not null$/);
    expect(usageMessage(() => parseRecipients('{}'))).toBe('--identity: names no recipient');
    expect(usageMessage(() => parseRecipients('{"b": "x"}'))).toBe(
      '--identity: recipient "b" must be an array of attributes, not a string',
    );
    expect(usageMessage(() => parseRecipients('{"b": [{"v": "x"}]}'))).toBe(
      '--identity: recipient "b"[0] needs "t", a non-empty attribute type',
    );
    expect(usageMessage(() => parseRecipients('{"b": [{"t": ""}]}'))).toBe(
      '--identity: recipient "b"[0] needs "t", a non-empty attribute type',
    );
    expect(usageMessage(() => parseRecipients('{"b": [{"t": "x", "v": 5}]}'))).toBe(
      '--identity: recipient "b"[0]: "v" must be a string',
    );
    expect(usageMessage(() => parseRecipients('{"b": [{"t": "x", "vaule": "y"}]}'))).toBe(
      '--identity: recipient "b"[0] has an unknown field "vaule" (allowed: t, v)',
    );
    expect(usageMessage(() => parseRecipients('{"b": [["x"]]}'))).toBe(
      '--identity: recipient "b"[0] must be an object {"t": type, "v": value}, not an array',
    );
    expect(usageMessage(() => parseRecipients('{"b": {"t": -1, "con": []}}'))).toBe(
      '--identity: recipient "b": "t" must be a Unix timestamp in seconds',
    );
    expect(usageMessage(() => parseRecipients('{"c": {"ts": 1, "con": []}}'))).toBe(
      '--identity: recipient "c" has an unknown field "ts" (allowed: t, con)',
    );
    expect(usageMessage(() => parseRecipients('{"b": {"t": 1}}'))).toBe(
      '--identity: recipient "b" needs "con", an array of attributes',
    );
    expect(usageMessage(() => parseRecipients('{"b": {"con": {}}}'))).toBe(
      '--identity: recipient "b".con must be an array of attributes, not an object',
    );
  });

  it('gives back exactly the recipients and attributes it was given (property)', () => {
    const attribute = fc.record({ t: fc.string({ minLength: 1 }), v: fc.string() });
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), fc.array(attribute, { minLength: 1, maxLength: 4 }), { minKeys: 1, maxKeys: 5 }),
        (recipients) => {
          const parsed = parseRecipients(JSON.stringify(recipients));
          expect(Object.fromEntries(parsed.policies)).toEqual(JSON.parse(JSON.stringify(recipients)));
        },
      ),
    );
  });
});

describe('parseSignId (--pub-sign-id / --priv-sign-id)', () => {
  it('takes a list of types', () => {
    expect(parseSignId(JSON.stringify([{ t: EMAIL }, { t: MOBILE }]), '-P')).toEqual([{ t: EMAIL }, { t: MOBILE }]);
    expect(parseSignId('[]', '-P')).toEqual([]);
  });

  it('refuses values (they come from the disclosure), duplicates, other fields and other shapes', () => {
    expect(usageMessage(() => parseSignId(JSON.stringify([{ t: EMAIL, v: 'a@b' }]), '--pub-sign-id'))).toBe(
      '--pub-sign-id: entry 0: give only the type; the value comes from what you disclose',
    );
    expect(usageMessage(() => parseSignId(JSON.stringify([{ t: EMAIL }, { t: EMAIL }]), '-P'))).toBe(
      `-P: ${EMAIL} is listed twice`,
    );
    expect(usageMessage(() => parseSignId('[{"t": "x", "optional": true}]', '-P'))).toBe(
      '-P: entry 0 has an unknown field "optional" (allowed: t)',
    );
    expect(usageMessage(() => parseSignId('"x"', '-S'))).toBe('-S: must be a JSON array of {"t": type}, not a string');
    expect(usageMessage(() => parseSignId('["x"]', '-S'))).toBe(
      '-S: entry 0 must be an object {"t": type}, not a string',
    );
  });

  it('the signing session asks for every type once, without values', () => {
    expect(signingDisclosure([{ t: EMAIL }], [{ t: MOBILE }, { t: EMAIL }])).toEqual([{ t: EMAIL }, { t: MOBILE }]);
  });
});

describe('parseAttrs (--attr)', () => {
  it('splits at the first "=" and keeps the rest of the value', () => {
    expect([...parseAttrs([`${EMAIL}=a=b@example.org`, 'x.y.z.w='])]).toEqual([
      [EMAIL, 'a=b@example.org'],
      ['x.y.z.w', ''],
    ]);
  });

  it('refuses a missing type or "=", and a type given twice', () => {
    expect(usageMessage(() => parseAttrs(['novalue']))).toBe('--attr: expected type=value, got "novalue"');
    expect(usageMessage(() => parseAttrs(['=x']))).toBe('--attr: expected type=value, got "=x"');
    expect(usageMessage(() => parseAttrs(['a=1', 'a=2']))).toBe('--attr: a is given twice');
  });
});

describe('hidden values and hints', () => {
  it('tells "any value", "hidden" and hint values apart as the header shows them', () => {
    const shown = hidePolicy({
      ts: 1,
      con: [{ t: EMAIL }, { t: EMAIL, v: 'a@b' }, { t: MOBILE, v: '0612345678' }],
    }).con;
    expect(shown.map(hiddenValue)).toEqual([
      { kind: 'any' },
      { kind: 'hidden' },
      { kind: 'hint', visible: '061234', starred: 4 },
    ]);
  });

  it('a value fits the hint the header derived from it, and other values mostly do not (property)', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 12 }),
        fc.string({ unit: 'grapheme', maxLength: 12 }),
        (value, other) => {
          let hint: ReturnType<typeof hiddenValue>;
          try {
            hint = hiddenValue(hidePolicy({ ts: 0, con: [{ t: MOBILE, v: value }] }).con[0]!);
          } catch {
            return; // values the reference cannot hide either (a cut through a character)
          }
          if (hint.kind !== 'hint') return;
          expect(matchesHint(value, hint)).toBe(true);
          const otherHint = (() => {
            try {
              return hiddenValue(hidePolicy({ ts: 0, con: [{ t: MOBILE, v: other }] }).con[0]!);
            } catch {
              return undefined;
            }
          })();
          if (
            otherHint?.kind === 'hint' &&
            (otherHint.visible !== hint.visible || otherHint.starred !== hint.starred)
          ) {
            expect(matchesHint(other, hint)).toBe(false);
          }
        },
      ),
    );
  });

  it('fills in the recipient id for e-mail types and its domain for domain types, nothing else', () => {
    expect(defaultValue('bob@example.org', EMAIL)).toBe('bob@example.org');
    expect(defaultValue('bob@example.org', 'irma-demo.sidn-pbdf.email.email')).toBe('bob@example.org');
    expect(defaultValue('bob@example.org', DOMAIN)).toBe('example.org');
    expect(defaultValue('bob', EMAIL)).toBeUndefined();
    expect(defaultValue('bob@example.org', MOBILE)).toBeUndefined();
  });

  it('describes policies on one line', () => {
    expect(describePolicy({ ts: 0, con: [] })).toBe('(no attributes)');
    expect(describePolicy({ ts: 0, con: [{ t: EMAIL, v: '' }, { t: MOBILE, v: '061234****' }, { t: DOMAIN }] })).toBe(
      `${EMAIL} = (hidden), ${MOBILE} = "061234****", ${DOMAIN} (any value)`,
    );
  });
});
