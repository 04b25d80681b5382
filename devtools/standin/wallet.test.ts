import { describe, expect, it } from 'vitest';
import { WalletError, chooseDisclosure, fromQr } from './wallet.js';

const ptr = { u: 'http://localhost:8088/irma/session/abcdefghijABCDEFGHIJ', irmaqr: 'disclosing' };
const json = JSON.stringify(ptr);

describe('fromQr', () => {
  it('reads every QR form the Yivi app reads', () => {
    const forms = [
      json,
      `  ${json}\n`,
      `https://open.yivi.app/-/session#${encodeURIComponent(JSON.stringify({ ...ptr, continueOnSecondDevice: true }))}`,
      `https://irma.app/-/session#${json}`,
      `irma://qr/json/${encodeURIComponent(json)}`,
      `intent://qr/json/${encodeURIComponent(json)}#Intent;package=org.irmacard.cardemu;scheme=irma;l.timestamp=1;end`,
    ];
    for (const form of forms) expect(fromQr(form)).toEqual(ptr);
    // The session package (POST /session, the PKG's /start) and plain objects too.
    expect(fromQr({ sessionPtr: ptr, token: 'x' })).toEqual(ptr);
    expect(fromQr(ptr)).toEqual(ptr);
  });

  it('refuses anything without a usable pointer', () => {
    const bad: Array<string | object> = [
      '',
      'hello',
      'https://open.yivi.app/-/session#%E0%A4%A',
      'https://open.yivi.app/-/session#{not json',
      '[1,2]',
      JSON.stringify({ u: 'ftp://x/irma/session/abc', irmaqr: 'disclosing' }),
      JSON.stringify({ u: 'http://x/irma/session/abc', irmaqr: 'redirect' }),
      JSON.stringify({ irmaqr: 'disclosing' }),
      { sessionPtr: null },
    ];
    for (const qr of bad) {
      expect(() => fromQr(qr)).toThrow(WalletError);
      try {
        fromQr(qr);
      } catch (e) {
        expect((e as WalletError).code).toBe('BAD_QR');
      }
    }
  });
});

describe('chooseDisclosure', () => {
  const E = 'irma-demo.sidn-pbdf.email.email';
  const M = 'irma-demo.sidn-pbdf.mobilenumber.mobilenumber';

  it('prefers a satisfiable option, then skipping, then the attributes it has, then nothing', () => {
    const disclose = [[[{ type: E, value: 'alice@example.org' }], [M]]];
    expect(chooseDisclosure(disclose, { [E]: 'alice@example.org', [M]: '06' })).toEqual([
      [{ id: E, rawvalue: 'alice@example.org' }],
    ]);
    expect(chooseDisclosure(disclose, { [E]: 'bob@example.org', [M]: '06' })).toEqual([[{ id: M, rawvalue: '06' }]]);
    expect(chooseDisclosure(disclose, { [E]: 'bob@example.org' })).toEqual([[{ id: E, rawvalue: 'bob@example.org' }]]);
    expect(chooseDisclosure([[[{ type: E, value: 'a' }], []]], { [E]: 'b' })).toEqual([[]]);
    expect(chooseDisclosure(disclose, {})).toEqual([[]]);
  });

  it('discloses whole credentials as "present" and does not read inherited keys', () => {
    expect(chooseDisclosure([[['irma-demo.sidn-pbdf.email']]], { [E]: 'x' })).toEqual([
      [{ id: 'irma-demo.sidn-pbdf.email', rawvalue: 'present' }],
    ]);
    expect(chooseDisclosure([[['a.b.c.toString']]], {})).toEqual([[]]);
  });
});
