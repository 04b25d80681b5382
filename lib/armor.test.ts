import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectLinearTime, MIB, repeated } from '../test/linear-time.js';
import { loadPgWasm, type PgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector, readAll } from '../test/streams.js';
import { ARMOR_BEGIN, ARMOR_END, ARMOR_LINE_LENGTH, armor, armorStream, dearmor, dearmorStream } from './armor.js';
import { ErrorCode, FormatError, InputError, PostGuardError } from './errors.js';
import { StreamUnsealer, Unsealer, seal, sealStream, type Policy, type SealOptions } from './index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';

/**
 * ASCII armor (lib/armor.ts): pg-js's layout written exactly, read strictly, the same through the
 * streams whatever the chunking, in time linear in the text, and real ciphertexts of ours and
 * pg-wasm's carried through it.
 */

const BEGIN = '-----BEGIN POSTGUARD MESSAGE-----';
const END = '-----END POSTGUARD MESSAGE-----';

/**
 * The layout as pg-js ≤ 0.10 defines it, restated from its definition with Node's own base64:
 * standard base64 cut every 76 characters, the lines joined by LF, BEGIN and END around them.
 */
function pgJsForm(bytes: Uint8Array): string {
  const b64 = Buffer.from(bytes).toString('base64');
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 76) lines.push(b64.slice(i, i + 76));
  return `${BEGIN}\n${lines.join('\n')}\n${END}`;
}

const crlf = (text: string) => text.replaceAll('\n', '\r\n');

/** `items` cut into pieces at the given points (taken modulo the length, any order, repeats allowed). */
function cut<T extends string | Uint8Array>(items: T, points: number[]): T[] {
  const at = [...new Set(points.map((p) => p % (items.length + 1)))].sort((a, b) => a - b);
  const pieces: T[] = [];
  let from = 0;
  for (const p of [...at, items.length]) {
    pieces.push(items.slice(from, p) as T);
    from = p;
  }
  return pieces;
}

function source<T>(chunks: T[]): ReadableStream<T> {
  let i = 0;
  return new ReadableStream<T>({
    pull(controller) {
      if (i < chunks.length) controller.enqueue(chunks[i++]!);
      else controller.close();
    },
  });
}

async function collect<T>(readable: ReadableStream<T>): Promise<T[]> {
  const out: T[] = [];
  const reader = readable.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return out;
    out.push(value);
  }
}

const armorChunks = async (chunks: Uint8Array[]) => (await collect(source(chunks).pipeThrough(armorStream()))).join('');
const dearmorChunks = async (chunks: string[]) =>
  Buffer.concat(await collect(source(chunks).pipeThrough(dearmorStream())));

/** The error `run` throws or rejects with. */
async function failure(run: () => unknown): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

const expectCode = (error: unknown, code: ErrorCode, type: typeof PostGuardError = FormatError) => {
  expect(error).toBeInstanceOf(type);
  expect((error as PostGuardError).code).toBe(code);
};

/** Byte equality for big arrays (toEqual walks them element by element, slowly). */
const expectSameBytes = (got: Uint8Array, want: Uint8Array) => {
  expect(got.length).toBe(want.length);
  expect(Buffer.from(got.buffer, got.byteOffset, got.length).equals(want)).toBe(true);
};

const points = fc.array(fc.nat(), { maxLength: 24 });

describe('the layout pg-js writes', () => {
  // Written out by hand from the definition (base64 from Python's base64 module), not by armor().
  const KNOWN: Array<[string, Uint8Array, string]> = [
    ['the empty message: one empty body line', new Uint8Array(0), `${BEGIN}\n\n${END}`],
    ['one byte, two pad characters', Uint8Array.of(0xff), `${BEGIN}\n/w==\n${END}`],
    ['two bytes, one pad character', Uint8Array.of(0xff, 0xff), `${BEGIN}\n//8=\n${END}`],
    ['the PostGuard prelude and version 2', Uint8Array.of(0x14, 0x8a, 0x8e, 0xa7, 0, 2), `${BEGIN}\nFIqOpwAC\n${END}`],
    [
      '57 bytes: exactly one full line',
      Uint8Array.from({ length: 57 }, (_, i) => i),
      `${BEGIN}\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4\n${END}`,
    ],
    [
      '58 bytes: a full line and a short padded one',
      Uint8Array.from({ length: 58 }, (_, i) => i),
      `${BEGIN}\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4\nOQ==\n${END}`,
    ],
    [
      "114 bytes: two full lines of '+' and '/'",
      Uint8Array.from({ length: 114 }, (_, i) => [0xfb, 0xff, 0xbf][i % 3]!),
      `${BEGIN}\n${'+/'.repeat(38)}\n${'+/'.repeat(38)}\n${END}`,
    ],
  ];

  it('its constants', () => {
    expect([ARMOR_BEGIN, ARMOR_END, ARMOR_LINE_LENGTH]).toEqual([BEGIN, END, 76]);
  });

  for (const [name, bytes, text] of KNOWN) {
    it(`known answer: ${name}`, async () => {
      expect(armor(bytes)).toBe(text);
      expect(dearmor(text)).toEqual(bytes);
      expect(dearmor(crlf(text))).toEqual(bytes);
      expect(await armorChunks([bytes])).toBe(text);
      expect(new Uint8Array(await dearmorChunks([text]))).toEqual(bytes);
    });
  }

  it('armor is the definition, for random bytes of up to 40 lines', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 * 57 + 3 }), (bytes) => {
        expect(armor(bytes)).toBe(pgJsForm(bytes));
      }),
      { numRuns: 300 },
    );
  });
});

describe('round trips, whole and streamed, whatever the chunking', () => {
  const bytes = fc.oneof(fc.uint8Array({ maxLength: 300 }), fc.uint8Array({ minLength: 300, maxLength: 5000 }));

  it('dearmor(armor(x)) is x, with LF or CRLF, and any line breaks after END', () => {
    fc.assert(
      fc.property(
        bytes,
        fc.boolean(),
        fc.array(fc.constantFrom('\n', '\r\n'), { maxLength: 3 }),
        (x, windows, tail) => {
          const text = armor(x);
          const read = dearmor((windows ? crlf(text) : text) + tail.join(''));
          expect(read).toEqual(x);
          expect(read.byteLength).toBe(read.buffer.byteLength); // an exact buffer, not a view of a bigger one
        },
      ),
      { numRuns: 300 },
    );
  });

  it('armorStream writes armor(x) whatever the chunks', async () => {
    await fc.assert(
      fc.asyncProperty(bytes, points, async (x, at) => {
        expect(await armorChunks(cut(x, at))).toBe(armor(x));
      }),
      { numRuns: 200 },
    );
  });

  it('dearmorStream reads x whatever the chunks, LF or CRLF (a CR and its LF apart included)', async () => {
    await fc.assert(
      fc.asyncProperty(bytes, points, fc.boolean(), async (x, at, windows) => {
        const text = windows ? crlf(armor(x)) : armor(x);
        expect(new Uint8Array(await dearmorChunks(cut(text, at)))).toEqual(x);
      }),
      { numRuns: 200 },
    );
  });

  it('mixed line endings are read line by line', () => {
    const x = Uint8Array.from({ length: 200 }, (_, i) => i);
    const lines = armor(x).split('\n');
    expect(dearmor(lines.map((l, i) => (i % 2 ? `${l}\r\n` : `${l}\n`)).join(''))).toEqual(x);
  });

  it('the streams hold back less than a line: output keeps up with input (memory flat)', async () => {
    // A source that counts what it gave, and a sink that checks, for each chunk it gets, that the
    // output so far covers all the input given so far but for the chunks in the pipe and one line.
    const total = 2 * MIB + 11;
    const x = Uint8Array.from({ length: total }, (_, i) => (i * 131 + (i >> 9)) & 255);
    const chunk = 4099;
    let given = 0;
    let written = 0;
    const counted = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (given >= total) return controller.close();
          const end = Math.min(total, given + chunk);
          controller.enqueue(x.slice(given, end));
          given = end;
        },
      },
      { highWaterMark: 0 },
    );
    const inPipe = 4 * chunk;
    const text: string[] = [];
    await counted.pipeThrough(armorStream()).pipeTo(
      new WritableStream<string>({
        write(piece) {
          text.push(piece);
          written += piece.length;
          const lines = Math.floor(Math.max(0, given - inPipe - 57) / 57);
          expect(written).toBeGreaterThanOrEqual(BEGIN.length + 1 + lines * 77);
          expect(piece.length).toBeLessThanOrEqual(BEGIN.length + 1 + Math.ceil((chunk + 57) / 57) * 77 + END.length);
        },
      }),
    );
    const armored = text.join('');
    expect(armored).toBe(armor(x));

    let read = 0;
    let decoded = 0;
    const pieces = cut(
      armored,
      Array.from({ length: 700 }, (_, i) => i * 4001 + (i % 7)),
    );
    const textSource = new ReadableStream<string>(
      {
        pull(controller) {
          const piece = pieces.shift();
          if (piece === undefined) return controller.close();
          controller.enqueue(piece);
          read += piece.length;
        },
      },
      { highWaterMark: 0 },
    );
    const out = collector();
    await textSource
      .pipeThrough(dearmorStream())
      .pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(piece, controller) {
            decoded += piece.length;
            expect(decoded).toBeGreaterThanOrEqual(Math.floor(((read - 4 * 4001 - 2 * 77) * 57) / 77));
            controller.enqueue(piece);
          },
        }),
      )
      .pipeTo(out.writable);
    expectSameBytes(out.bytes(), x);
  });
});

describe('strict reading: every rule refuses with a typed error', () => {
  const x = Uint8Array.from({ length: 100 }, (_, i) => (i * 37) & 255);
  const valid = pgJsForm(x); // two body lines, of 76 and 60 characters
  const [, l1, l2] = valid.split('\n') as [string, string, string, string];
  const form = (...body: string[]) => `${BEGIN}\n${body.join('\n')}\n${END}`;
  const at = (line: string, i: number, c: string) => line.slice(0, i) + c + line.slice(i + 1);

  it('the sample is what the rules are applied to', () => {
    expect([l1.length, l2.length]).toEqual([76, 60]);
    expect(dearmor(form(l1, l2))).toEqual(x);
  });

  const INVALID: Array<[string, string]> = [
    // The BEGIN line.
    ['no BEGIN line', `${l1}\n${l2}\n${END}`],
    ['another BEGIN line', valid.replace('POSTGUARD', 'PGP')],
    ['a lower-case BEGIN line', valid.replace(BEGIN, BEGIN.toLowerCase())],
    ['a blank line before BEGIN', `\n${valid}`],
    ['a space before BEGIN', ` ${valid}`],
    ['text before BEGIN', `Hi,\n${valid}`],
    ['a space after BEGIN', valid.replace(`${BEGIN}\n`, `${BEGIN} \n`)],
    ['a lone CR after BEGIN', valid.replace(`${BEGIN}\n`, `${BEGIN}\r`)],
    ['a UTF-8 byte order mark', `\uFEFF${valid}`],
    // The body's characters.
    ...['*', '-', '_', ' ', '\t', '.', '\0', 'é', '\uFF21', '\u{1F600}', '\u2028'].map((c): [string, string] => [
      `the character ${JSON.stringify(c)} in a line`,
      form(at(l1, 10, c), l2),
    ]),
    ['base64url instead of base64', form(l1.replaceAll('+', '-').replaceAll('/', '_'), l2)],
    ['a lone CR inside a line', form(at(l1, 40, '\r'), l2)],
    ['a space at the end of a line', form(`${l1} `, l2)],
    // Line lengths.
    ['a line of 77 characters', form(l1 + l2[0]!, l2.slice(1))],
    ['a short line that is not the last', form(l1.slice(0, 72), l1.slice(72) + l2)],
    ['a last line whose length is not a multiple of 4', form(l1, l2.slice(0, 59))],
    ['a last line of 3 characters', form('AAA')],
    ['no body line at all', `${BEGIN}\n${END}`],
    ['an empty line in the body', form(l1, '', l2)],
    ['an empty line before END', form(l1, l2, '')],
    ['two empty lines for the empty message', `${BEGIN}\n\n\n${END}`],
    ['the empty line and then data', `${BEGIN}\n\nAAAA\n${END}`],
    // Padding.
    ['padding in the middle of a line', form(at(l1, 10, '='), l2)],
    ['a group of padding in the middle of a line', form(`${l1.slice(0, 8)}AA==${l1.slice(12)}`, l2)],
    ['padding at the start of a group', form(at(l1, 8, '='), l2)],
    ['padding as the second digit of a group', form('A===')],
    ['four pad characters', form('AAAA', '====')],
    ['"=" then a digit', form('AA=A')],
    ['a padded full line followed by another line', form(`${l1.slice(0, 72)}AA==`, 'AAAA')],
    ['a padded short line followed by another line', form('AA==', 'AAAA')],
    ['a group after a padded group on the same line', form('AA==AAAA')],
    ['pad bits that are not zero (one pad character)', form('//9=')],
    ['pad bits that are not zero (two pad characters)', form('/x==')],
    // The END line and after it.
    ['another END line', valid.replace(`\n${END}`, '\n-----END PGP MESSAGE-----')],
    ['an END line cut short and then a line break', valid.replace(`\n${END}`, `\n${END.slice(0, -1)}\n`)],
    ['a dash line that is no END line', form(l1, l2, '-----', END)],
    ['a space after END', `${valid} `],
    ['a tab after END', `${valid}\t`],
    ['a word after END', `${valid}\nThanks`],
    ['a space on a line after END', `${valid}\n \n`],
    ['a second armored block', `${valid}\n${valid}`],
    ['a lone CR at the very end', `${valid}\r`],
    ['CR CR LF after END', `${valid}\r\r\n`],
  ];

  for (const [name, text] of INVALID) {
    it(`ARMOR_INVALID: ${name}, whole and streamed in any chunks`, async () => {
      expectCode(await failure(() => dearmor(text)), ErrorCode.ARMOR_INVALID);
      await fc.assert(
        fc.asyncProperty(points, async (at) => {
          expectCode(await failure(() => dearmorChunks(cut(text, at))), ErrorCode.ARMOR_INVALID);
        }),
        { numRuns: 10 },
      );
    });
  }

  it('the error says where: line and column', () => {
    expect(() => dearmor(form(at(l1, 10, '*'), l2))).toThrow(/line 2, column 11/);
    expect(() => dearmor(crlf(form(l1, at(l2, 3, '*'))))).toThrow(/line 3, column 4/);
  });

  const TRUNCATED: Array<[string, string]> = [
    ['nothing', ''],
    ['half the BEGIN line', BEGIN.slice(0, 15)],
    ['the BEGIN line alone', BEGIN],
    ['the BEGIN line and its CR', `${BEGIN}\r`],
    ['BEGIN and a line break', `${BEGIN}\n`],
    ['the empty message without its END', `${BEGIN}\n\n`],
    ['part of the first line', `${BEGIN}\n${l1.slice(0, 30)}`],
    ['a whole line and part of the next', `${BEGIN}\n${l1}\n${l2.slice(0, 13)}`],
    ['a quarter group', `${BEGIN}\n${l1}\nA`],
    ['the whole body but no END', `${BEGIN}\n${l1}\n${l2}\n`],
    ['the body and a CR', `${BEGIN}\r\n${l1}\r\n${l2}\r`],
    ['an END line cut short', valid.slice(0, -1)],
  ];

  for (const [name, text] of TRUNCATED) {
    it(`TRUNCATED: ${name}, whole and streamed in any chunks`, async () => {
      expectCode(await failure(() => dearmor(text)), ErrorCode.TRUNCATED);
      await fc.assert(
        fc.asyncProperty(points, async (at) => {
          expectCode(await failure(() => dearmorChunks(cut(text, at))), ErrorCode.TRUNCATED);
        }),
        { numRuns: 10 },
      );
    });
  }

  it('every proper prefix of an armored text is TRUNCATED, LF or CRLF', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), fc.nat(), fc.boolean(), (bytes, n, windows) => {
        const text = windows ? crlf(armor(bytes)) : armor(bytes);
        expectCode(
          (() => {
            try {
              dearmor(text.slice(0, n % text.length));
            } catch (error) {
              return error;
            }
            return undefined;
          })(),
          ErrorCode.TRUNCATED,
        );
      }),
      { numRuns: 300 },
    );
  });

  it('what may follow END: nothing, or line breaks (LF, CRLF) only', () => {
    for (const tail of ['', '\n', '\r\n', '\n\n\n', '\r\n\n\r\n']) expect(dearmor(valid + tail)).toEqual(x);
  });

  it('a stream that fails after END-less text errors with TRUNCATED, not a silent close', async () => {
    const readable = source([`${BEGIN}\n`, l1]).pipeThrough(dearmorStream());
    expectCode(await failure(() => collect(readable)), ErrorCode.TRUNCATED);
  });

  it('INVALID_INPUT: what is not text or bytes', async () => {
    for (const bad of [undefined, null, 42, Uint8Array.of(45), { length: 0 }]) {
      expectCode(await failure(() => dearmor(bad as never)), ErrorCode.INVALID_INPUT, InputError);
      expectCode(
        await failure(() => collect(source([`${BEGIN}\n`, bad as never]).pipeThrough(dearmorStream()))),
        ErrorCode.INVALID_INPUT,
        InputError,
      );
    }
    for (const bad of [undefined, null, 'text', [1, 2], { length: 0 }]) {
      expectCode(await failure(() => armor(bad as never)), ErrorCode.INVALID_INPUT, InputError);
      expectCode(
        await failure(() => collect(source([bad as never]).pipeThrough(armorStream()))),
        ErrorCode.INVALID_INPUT,
        InputError,
      );
    }
    // Other byte views are bytes to the stream, as elsewhere in the library (lib/io.ts asBytes).
    const view = new DataView(Uint8Array.of(0xff).buffer);
    expect(await armorChunks([view as never])).toBe(armor(Uint8Array.of(0xff)));
  });
});

describe('real ciphertexts through the armor, with pg-wasm 0.5.10', () => {
  const TS = 1_700_000_321;
  const EMAIL = 'pbdf.sidn-pbdf.email.email';
  let pg: PgWasm;
  let mpk: string;
  let vk: string;
  let options: SealOptions;
  let usk: string;
  const id = 'bob@example.com';
  const message = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 29 + 3) & 255);

  beforeAll(async () => {
    pg = await loadPgWasm();
    const kem = generateKemKeys();
    const ibs = generateSigningKeys();
    mpk = kem.mpk;
    vk = ibs.vk;
    const sender: Policy = { ts: TS, con: [{ t: EMAIL, v: 'alice@example.com' }] };
    const recipient: Policy = { ts: TS, con: [{ t: EMAIL, v: id }] };
    options = { policy: { [id]: recipient }, pubSignKey: { key: extractSigningKey(ibs.sk, sender), policy: sender } };
    usk = extractUsk(kem.msk, recipient);
  });

  /** Text pieces of irregular sizes, as a TextDecoderStream or a paste might give them. */
  const textPieces = (text: string) =>
    cut(
      text,
      Array.from({ length: 64 }, (_, i) => (i * i * 977) % text.length),
    );

  it('our seal, armored, read back and opened by pg-wasm', async () => {
    const plain = message(3000);
    const ct = await seal(mpk, options, plain);
    const text = armor(ct);
    expect(text.startsWith(`${BEGIN}\nFIqOpwAC`)).toBe(true); // the prelude and version 2
    expect(
      text
        .split('\n')
        .slice(1, -2)
        .every((line) => line.length === 76),
    ).toBe(true);
    const [got] = await (await pg.Unsealer.new(dearmor(text), vk)).unseal(id, usk);
    expect(got).toEqual(plain);
  });

  it("pg-wasm's seal, armored by us, read back (whole and streamed) and opened by ours", async () => {
    const plain = message(5000);
    const ct = await pg.seal(mpk, options, plain);
    const text = crlf(armor(ct));
    const [got] = await (await Unsealer.new(dearmor(text), vk)).unseal(id, usk);
    expect(got).toEqual(plain);
    const [again] = await (
      await Unsealer.new(new Uint8Array(await dearmorChunks(textPieces(text))), vk)
    ).unseal(id, usk);
    expect(again).toEqual(plain);
  });

  it('our sealStream into armorStream, the text through dearmorStream into pg-wasm StreamUnsealer', async () => {
    const plain = message(600_000); // three segments
    const armoring = armorStream();
    const [, pieces] = await Promise.all([
      sealStream(mpk, options, chunkedSource(plain, 10_007), armoring.writable),
      collect(armoring.readable),
    ]);
    const text = pieces.join('');
    const out = collector();
    const u = await pg.StreamUnsealer.new(source(textPieces(text)).pipeThrough(dearmorStream()), vk);
    await u.unseal(id, usk, out.writable);
    expectSameBytes(out.bytes(), plain);
  });

  it("pg-wasm's sealStream into armorStream, the text through dearmorStream into our StreamUnsealer", async () => {
    const plain = message(300_000);
    const armoring = armorStream();
    const [, pieces] = await Promise.all([
      pg.sealStream(mpk, options, chunkedSource(plain, 65_536), armoring.writable),
      collect(armoring.readable),
    ]);
    const text = pieces.join('');
    const u = await StreamUnsealer.new(source(textPieces(text)).pipeThrough(dearmorStream()), vk);
    const out = collector();
    await u.unseal(id, usk, out.writable);
    expect(out.state()).toBe('closed');
    expectSameBytes(out.bytes(), plain);
  });

  it('a damaged armored ciphertext is refused before anything is opened', async () => {
    const text = armor(await seal(mpk, options, message(100)));
    const damaged = text.replace('\n', '\n ');
    const readable = source(textPieces(damaged)).pipeThrough(dearmorStream());
    expectCode(await failure(() => readAll(readable)), ErrorCode.ARMOR_INVALID);
  });

  it('a StreamUnsealer reading a damaged or cut armored stream fails with SOURCE_FAILED, the armor error its cause', async () => {
    const armoring = armorStream();
    const [, pieces] = await Promise.all([
      sealStream(mpk, options, chunkedSource(message(1000)), armoring.writable),
      collect(armoring.readable),
    ]);
    const text = pieces.join('');
    for (const [bad, code] of [
      [text.replace('\n', '\n*'), ErrorCode.ARMOR_INVALID],
      [text.slice(0, -40), ErrorCode.TRUNCATED],
    ] as const) {
      const error = await failure(async () => {
        const u = await StreamUnsealer.new(source(textPieces(bad)).pipeThrough(dearmorStream()), vk);
        await u.unseal(id, usk, collector().writable);
      });
      expectCode(error, ErrorCode.SOURCE_FAILED, PostGuardError);
      expectCode((error as Error).cause, code);
    }
  });
});

describe('time linear in the text', () => {
  const typed = (error: unknown) => error instanceof PostGuardError;
  /** A valid armored text of about `n` characters, LF (benign) or CRLF. */
  const armoredOf = (n: number) => armor(Uint8Array.from({ length: Math.floor((n * 57) / 77) }, (_, i) => i & 255));

  it('dearmor and dearmorStream: the worst texts we could craft against a benign one of the same size', async () => {
    const crafted: Array<[string, (n: number) => string]> = [
      ['CRLF everywhere', (n) => crlf(armoredOf(n - n / 77))],
      ['a run of line breaks after END, then a letter', (n) => `${BEGIN}\n\n${END}${repeated('\r\n', n)}x`],
      ['one endless line of base64', (n) => `${BEGIN}\n${repeated('A', n)}`],
      ['padding everywhere', (n) => `${BEGIN}\n${repeated('AA==\n', n)}${END}`],
      ['dashes that start END lines over and over', (n) => `${BEGIN}\n${repeated(`AAAA\n${END.slice(0, 30)}\n`, n)}`],
      ['BEGIN lines over and over', (n) => repeated(`${BEGIN.slice(0, 32)}\n`, n)],
      ['a text that is all CR', (n) => `${BEGIN}${repeated('\r', n)}`],
    ];
    for (const [name, make] of crafted) {
      await expectLinearTime(
        `dearmor: ${name}`,
        (n) => {
          const evil = make(n);
          const good = armoredOf(n);
          return { crafted: () => dearmor(evil), benign: () => dearmor(good) };
        },
        { refused: typed },
      );
    }
    await expectLinearTime(
      'dearmorStream: CRLF everywhere, in 64 KiB pieces',
      (n) => {
        const evil = cut(
          crlf(armoredOf(n - n / 77)),
          Array.from({ length: n >> 16 }, (_, i) => (i + 1) << 16),
        );
        const good = cut(
          armoredOf(n),
          Array.from({ length: n >> 16 }, (_, i) => (i + 1) << 16),
        );
        return { crafted: () => dearmorChunks(evil), benign: () => dearmorChunks(good) };
      },
      { refused: typed },
    );
  });

  it('armor and armorStream: any bytes take the same time', async () => {
    await expectLinearTime('armor: all 0xff against random', (n) => {
      const ones = new Uint8Array(n).fill(0xff);
      const mixed = Uint8Array.from({ length: n }, (_, i) => (i * 2654435761) >>> 24);
      return { crafted: () => armor(ones), benign: () => armor(mixed) };
    });
    await expectLinearTime('armorStream: one-byte chunks against one chunk', (n) => {
      const bytes = new Uint8Array(n >> 6).fill(7); // one-byte chunks are slow per byte: a sixty-fourth
      const ones = cut(
        bytes,
        Array.from({ length: bytes.length }, (_, i) => i),
      );
      return { crafted: () => armorChunks(ones), benign: () => armorChunks([new Uint8Array(n)]) };
    });
  });
});
