import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakePkgKeys, sealAs } from '../../client/testing.js';
import { expectLinearTime, repeated as run } from '../../test/linear-time.js';
import { MailboxError, parseMailboxes } from './mailboxes.js';
import { apiKeyFromHeader } from './pkg.js';
import { RangeSyntaxError, parseContentRange, parseRangeHeader } from './range.js';
import { startStorage, uploadWhole, type RunningStorage } from './testing.js';
import { tokensEqual } from './tokens.js';

/**
 * What pg-storage reads from strangers, fed the worst input we could craft and a benign one of the
 * same size, up to 1 MiB (test/linear-time.ts): Content-Range and Range, the init body and its
 * mailbox list, the Authorization header, the Cryptify and recovery tokens and the proof header.
 * Each is refused (a typed error, or the status Cryptify gives) or handled in time linear in its
 * size. Over a socket Node refuses headers over 16 KiB itself; the app is asked in process here,
 * so its own parsing is what is measured. (The sender's policy in an upload's header is read at
 * finalize: see crafted-header.test.ts.)
 */

const keys = fakePkgKeys();
let storage: RunningStorage;
let file: Uint8Array<ArrayBuffer>;

beforeAll(async () => {
  storage = await startStorage({ verifyingKey: keys.vk, sessionTtlSeconds: 600 });
  file = await sealAs('alice@example.org', new Uint8Array(5000));
});
afterAll(() => storage.close());

describe('Content-Range and Range (devtools/storage/range.ts)', () => {
  const contentRanges: Array<[string, (n: number) => string]> = [
    ['whitespace between unit and range', (n) => `bytes${run(' \t', n)}0-1/2`],
    ['a run of slashes', (n) => `bytes ${run('/', n)}`],
    ['a run of dashes', (n) => `bytes ${run('0-', n)}/1`],
    ['a size of a million leading zeros', (n) => `bytes 0-1/${run('0', n)}1`],
    ['a start of a million digits', (n) => `bytes ${run('9', n)}-1/2`],
    ['words of whitespace', (n) => run('bytes \u00A0', n)],
  ];
  it.each(contentRanges)('parseContentRange, %s', async (what, header) => {
    await expectLinearTime(
      `parseContentRange, ${what}`,
      (n) => ({ crafted: () => parseContentRange(header(n)), benign: () => parseContentRange(run('x', n)) }),
      { refused: (e) => e instanceof RangeSyntaxError },
    );
  });

  const ranges: Array<[string, (n: number) => string]> = [
    ['a start of a million zeros', (n) => `bytes=${run('0', n)}-`],
    ['a suffix of a million digits', (n) => `bytes=-${run('9', n)}`],
    ['whitespace around the range', (n) => `bytes=${run(' ', n / 2)}0-1${run(' ', n / 2)}`],
    ['a run of dashes', (n) => `bytes=${run('-', n)}`],
    ['a list', (n) => `bytes=${run('0-1,', n)}`],
  ];
  it.each(ranges)('parseRangeHeader, %s', async (what, header) => {
    await expectLinearTime(`parseRangeHeader, ${what}`, (n) => ({
      crafted: () => parseRangeHeader(header(n), 1_000_000),
      benign: () => parseRangeHeader(run('x', n), 1_000_000),
    }));
  });
});

describe('mailbox lists (devtools/storage/mailboxes.ts)', () => {
  const lists: Array<[string, (n: number) => string]> = [
    // A display name followed by whitespace and no address: the name and the whitespace must not
    // share the run (the pattern once let both take it, which backtracked quadratically).
    ['a display name of spaces without an address', (n) => `a${run(' ', n)}x`],
    ['spaces before an unclosed address', (n) => `a${run(' ', n)}<b@c`],
    ['a quoted name of escapes', (n) => `"${run('\\\\', n)}" <a@example.org>`],
    ['an unterminated quote', (n) => `"${run('\\"', n)}`],
    ['empty entries', (n) => run(',', n)],
    ['a domain of hyphens', (n) => `a@${run('a-', n)}!`],
    ['a domain of dots', (n) => `a@${run('a.', n)}.`],
    ['a local part of dots', (n) => `${run('a.', n)}.@example.org`],
    ['nested brackets', (n) => `${run('<', n / 2)}a@b${run('>', n / 2)}`],
    ['a domain literal', (n) => `a@[${run(' ', n)}]`],
  ];
  it.each(lists)('%s', async (what, list) => {
    await expectLinearTime(
      `parseMailboxes, ${what}`,
      (n) => ({ crafted: () => parseMailboxes(list(n)), benign: () => parseMailboxes(`${run('a', n)}@example.org`) }),
      { refused: (e) => e instanceof MailboxError },
    );
  });
});

describe('headers with credentials (devtools/storage/pkg.ts, tokens.ts)', () => {
  it('Authorization: Bearer PG-…', async () => {
    for (const [what, header] of [
      ['spaces before the key', (n: number) => `Bearer ${run(' ', n)}PG-x`],
      ['spaces after it', (n: number) => `Bearer PG-x${run(' ', n)}`],
      ['a scheme of spaces', (n: number) => `bearer${run(' ', n)}`],
      ['line breaks', (n: number) => `Bearer ${run('\n', n)}`],
    ] as const) {
      await expectLinearTime(`apiKeyFromHeader, ${what}`, (n) => ({
        crafted: () => apiKeyFromHeader(header(n)),
        benign: () => apiKeyFromHeader(`Bearer PG-${run('a', n)}`),
      }));
    }
  });

  it('a presented token against the expected one', async () => {
    const expected = 'a'.repeat(64);
    await expectLinearTime('tokensEqual', (n) => ({
      crafted: () => tokensEqual(run('\u3000', n), expected),
      benign: () => tokensEqual(run('a', n), expected),
    }));
  });
});

describe('through the app (in process)', () => {
  const inject = async (options: {
    method?: 'GET' | 'POST' | 'PUT';
    url: string;
    headers?: Record<string, string>;
    payload?: string | Uint8Array;
  }) => (await storage.app.inject({ method: options.method ?? 'GET', ...options })).statusCode;

  it('init bodies: nesting, whitespace, a crafted recipient list; over 1 MiB refused', async () => {
    const init = { mailContent: '', mailLang: 'EN', confirm: false };
    const bodies: Array<[string, (n: number) => string, number]> = [
      ['nested arrays', (n) => `{"recipient":${run('[', n)}`, 400],
      ['whitespace between tokens', (n) => `{"recipient"${run(' \n', n - 30)}:5}`, 422],
      ['a recipient of spaces', (n) => JSON.stringify({ ...init, recipient: `a${run(' ', n - 120)}x` }), 400],
      ['a recipient of escapes', (n) => JSON.stringify({ ...init, recipient: `"${run('\\', n / 2 - 120)}` }), 400],
      ['over the limit', (n) => `{"recipient":"${run('a', n + 1024 * 1024)}"}`, 413],
    ];
    for (const [what, body, status] of bodies) {
      await expectLinearTime(`init, ${what}`, (n) => {
        // A long recipient that is no address either: the benign body goes through the same parser.
        const [crafted, benign] = [body(n), JSON.stringify({ ...init, recipient: `${run('a', n - 120)}@` })];
        const post = (payload: string) =>
          inject({ method: 'POST', url: '/fileupload/init', headers: { 'content-type': 'application/json' }, payload });
        return {
          crafted: async () => expect(await post(crafted)).toBe(crafted.length > 1024 * 1024 ? 413 : status),
          benign: () => post(benign),
        };
      });
    }
  });

  it('chunk and finalize headers: Content-Range, Cryptify token, proof, recovery token', async () => {
    const upload = await uploadWhole(storage.url, file);
    const put = (headers: Record<string, string>) =>
      inject({
        method: 'PUT',
        url: `/fileupload/${upload.uuid}`,
        headers: { 'content-type': 'application/octet-stream', ...headers },
        payload: new Uint8Array(1),
      });
    await expectLinearTime('chunk, a Content-Range of whitespace', (n) => ({
      crafted: async () =>
        expect(await put({ cryptifytoken: 'x', 'content-range': `bytes${run(' ', n)}0-1/*` })).toBe(400),
      benign: () => put({ cryptifytoken: 'x', 'content-range': run('x', n) }),
    }));
    await expectLinearTime('chunk, a long Cryptify token', (n) => ({
      crafted: async () =>
        expect(
          await put({ cryptifytoken: run('\u00A0 ', n), 'content-range': `bytes ${file.length}-${file.length + 1}/*` }),
        ).toBe(400),
      benign: () => put({ cryptifytoken: run('a', n), 'content-range': 'bytes 0-1/*' }),
    }));
    const finalize = (headers: Record<string, string>) =>
      inject({
        method: 'POST',
        url: `/fileupload/finalize/${upload.uuid}`,
        headers: { cryptifytoken: upload.token, 'content-range': `bytes */${file.length}`, ...headers },
      });
    for (const [what, proof] of [
      ['base64 padding', (n: number) => `A${run('=', n)}`],
      ['base64 then a stray character', (n: number) => `${run('A', n)}!`],
      ['a megabyte of base64', (n: number) => run('AAAA', n)],
    ] as const) {
      await expectLinearTime(`finalize, a proof of ${what}`, (n) => ({
        crafted: async () => expect(await finalize({ 'x-postguard-proof': proof(n) })).toBe(403),
        benign: () => finalize({ 'x-postguard-proof': run('B', n) }),
      }));
    }
    await expectLinearTime('status, a recovery token of whitespace', (n) => ({
      crafted: async () =>
        expect(
          await inject({
            url: `/fileupload/${upload.uuid}/status`,
            headers: { 'x-recovery-token': `${run(' ', n)}x` },
          }),
        ).toBe(404),
      benign: () => inject({ url: `/fileupload/${upload.uuid}/status`, headers: { 'x-recovery-token': run('a', n) } }),
    }));
    await expectLinearTime('download, a Range of a million zeros', (n) => ({
      crafted: async () =>
        expect(
          await inject({ url: `/filedownload/${upload.uuid}`, headers: { range: `bytes=${run('0', n)}-9` } }),
        ).toBe(206),
      benign: () => inject({ url: `/filedownload/${upload.uuid}`, headers: { range: run('x', n) } }),
    }));
  });
});
