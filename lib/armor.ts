import { ErrorCode, FormatError, InputError, truncated } from './errors.js';
import { toBase64 } from './base64.js';
import { asBytes } from './io.js';

/**
 * ASCII armor: a ciphertext as text, for mail bodies and copy-paste. The layout is the one
 * `@e4a/pg-js` wrote into mail bodies up to 0.10 and still reads (2.4: "archival" armor):
 *
 * ```
 * -----BEGIN POSTGUARD MESSAGE-----
 * <standard base64 with '=' padding, 76 characters a line; the last line 1–76>
 * -----END POSTGUARD MESSAGE-----
 * ```
 *
 * Lines are joined by a line feed and nothing follows the END line. No header lines, no checksum:
 * the ciphertext authenticates itself when it is opened. An empty input has one empty body line.
 *
 * Writing gives exactly that. Reading is strict (docs/format.md, "Armor"): the text starts with the
 * BEGIN line, every body line but the last has exactly 76 characters, the last a multiple of 4,
 * only the base64 alphabet, padding only at the very end and with zero pad bits, then the END line,
 * then nothing but line breaks. Lines may end in LF or CRLF. A text that stops before the END line
 * is complete is TRUNCATED; anything else that breaks the layout is ARMOR_INVALID. Both are
 * `FormatError`s.
 *
 * Every function works in one pass over its input, a character at a time, and the streams hold
 * back less than one line: memory does not grow with the size of the message.
 */

/** The first line of an armored ciphertext. */
export const ARMOR_BEGIN = '-----BEGIN POSTGUARD MESSAGE-----';

/** The last line of an armored ciphertext. */
export const ARMOR_END = '-----END POSTGUARD MESSAGE-----';

/** Characters on every body line but the last (which has 1 to this many). */
export const ARMOR_LINE_LENGTH = 76;

/** Bytes that one full body line carries. */
const LINE_BYTES = (ARMOR_LINE_LENGTH / 4) * 3;

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** Each ASCII character's base64 digit, or -1. */
const DECODE = new Int8Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) DECODE[ALPHABET.charCodeAt(i)] = i;

const LF = 10;
const CR = 13;
const DASH = 45;
const PAD = 61;

/** Each base64 digit's ASCII code. */
const ENCODE = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
/** The text of ASCII bytes (one native call; UTF-8 is ASCII on them). */
const ascii = new TextDecoder();
const BEGIN_BYTES = Uint8Array.from(`${ARMOR_BEGIN}\n`, (c) => c.charCodeAt(0));

/** Writes the base64 of whole 3-byte groups `src[from..to)` at `dst[o..]`; returns the new `o`. */
function encodeGroups(src: Uint8Array, from: number, to: number, dst: Uint8Array, o: number): number {
  for (let i = from; i < to; i += 3) {
    const n = (src[i]! << 16) | (src[i + 1]! << 8) | src[i + 2]!;
    dst[o++] = ENCODE[n >> 18]!;
    dst[o++] = ENCODE[(n >> 12) & 63]!;
    dst[o++] = ENCODE[(n >> 6) & 63]!;
    dst[o++] = ENCODE[n & 63]!;
  }
  return o;
}

/**
 * The writing side, fed in pieces: `push` returns the text that is final so far (the BEGIN line,
 * then whole body lines, each with its line feed), `finish` the rest. It keeps back fewer than 57
 * bytes, the part of a line not yet full. Lines are written as ASCII bytes and turned into text
 * once per call.
 */
class ArmorWriter {
  private readonly held = new Uint8Array(LINE_BYTES);
  private heldBytes = 0;
  private started = false;
  private wroteLine = false;
  private finished = false;

  push(bytes: Uint8Array): string {
    const head = this.started ? 0 : BEGIN_BYTES.length;
    const lines = Math.floor((this.heldBytes + bytes.length) / LINE_BYTES);
    const out = new Uint8Array(head + lines * (ARMOR_LINE_LENGTH + 1));
    out.set(BEGIN_BYTES.subarray(0, head));
    this.started = true;
    let o = head;
    let i = 0;
    if (lines > 0) {
      this.wroteLine = true;
      if (this.heldBytes > 0) {
        i = LINE_BYTES - this.heldBytes;
        this.held.set(bytes.subarray(0, i), this.heldBytes);
        this.heldBytes = 0;
        o = encodeGroups(this.held, 0, LINE_BYTES, out, o);
        out[o++] = LF;
      }
      for (; i + LINE_BYTES <= bytes.length; i += LINE_BYTES) {
        o = encodeGroups(bytes, i, i + LINE_BYTES, out, o);
        out[o++] = LF;
      }
    }
    this.held.set(bytes.subarray(i), this.heldBytes);
    this.heldBytes += bytes.length - i;
    return ascii.decode(out);
  }

  finish(): string {
    if (this.finished) return '';
    this.finished = true;
    const head = this.started ? '' : `${ARMOR_BEGIN}\n`;
    // pg-js joins the lines with '\n' and puts one before END: an empty message is one empty line.
    const last = this.heldBytes > 0 || !this.wroteLine ? `${toBase64(this.held.subarray(0, this.heldBytes))}\n` : '';
    return `${head}${last}${ARMOR_END}`;
  }
}

/** Where the reader is: inside the BEGIN line, at or inside a body line, inside the END line, after it. */
const Part = { Begin: 0, Body: 1, End: 2, After: 3 } as const;
type Part = (typeof Part)[keyof typeof Part];

const armorInvalid = (what: string) => new FormatError(ErrorCode.ARMOR_INVALID, `armored text: ${what}`);

/**
 * The reading side, fed text in pieces of any size: `push` returns the bytes decoded so far (all
 * whole base64 groups), `finish` checks that the END line came. A state machine over characters:
 * it never looks back, so the time is linear and at most 3 characters are held between pushes.
 */
class ArmorReader {
  private part: Part = Part.Begin;
  /** Characters of the BEGIN or END line matched. */
  private at = 0;
  /** A carriage return was seen: the next character must be a line feed. */
  private cr = false;
  /** 1-based line and column of the last character read, for messages. */
  private line = 1;
  private column = 0;
  /** Characters on the current body line. */
  private length = 0;
  /** Body lines completed (the empty line of an empty message not counted). */
  private bodyLines = 0;
  /** The body was the one empty line of an empty message. */
  private emptyBody = false;
  /** The previous body line was the last one (short, or ended in padding): END must follow. */
  private lastDone = false;
  /** Base64 digits of the current group, and their value. */
  private digits = 0;
  private group = 0;
  /** '=' characters in the current group; after the group, whether the body ended in padding. */
  private pads = 0;
  private padded = false;

  push(text: string): Uint8Array {
    const out = new Uint8Array(Math.floor(((text.length + 3) * 3) / 4));
    let o = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      this.column++;
      if (this.cr) {
        if (c !== LF) {
          this.column--;
          throw this.invalid('a carriage return not followed by a line feed');
        }
        this.cr = false;
        this.lineBreak();
        continue;
      }
      if (c === CR || c === LF) {
        if (this.part === Part.Begin && this.at < ARMOR_BEGIN.length) {
          throw this.invalid(`the first line must be ${ARMOR_BEGIN}`);
        }
        if (this.part === Part.End && this.at < ARMOR_END.length) throw this.notEnd();
        if (c === CR) this.cr = true;
        else this.lineBreak();
        continue;
      }
      switch (this.part) {
        case Part.Begin:
          if (this.at === ARMOR_BEGIN.length) throw this.invalid(`the first line must be ${ARMOR_BEGIN} alone`);
          if (c !== ARMOR_BEGIN.charCodeAt(this.at)) throw this.invalid(`the first line must be ${ARMOR_BEGIN}`);
          this.at++;
          break;
        case Part.End:
          if (this.at === ARMOR_END.length) throw this.invalid('text after the END line, on its line');
          if (c !== ARMOR_END.charCodeAt(this.at)) throw this.notEnd();
          this.at++;
          break;
        case Part.After:
          throw this.invalid(`text after the END line (only line breaks may follow it)`);
        case Part.Body:
          if (this.length === 0) {
            if (c === DASH) {
              if (this.bodyLines === 0 && !this.emptyBody) {
                throw this.invalid('no body line (an empty message has one empty line)');
              }
              this.part = Part.End;
              this.at = 1;
              break;
            }
            if (this.emptyBody) throw this.invalid('an empty body line must be the only one');
            if (this.lastDone) {
              throw this.invalid(
                this.padded
                  ? 'a body line after the padded one (padding ends the body)'
                  : `a body line after a line shorter than ${ARMOR_LINE_LENGTH} characters (only the last may be)`,
              );
            }
          }
          if (++this.length > ARMOR_LINE_LENGTH) {
            throw this.invalid(`a body line longer than ${ARMOR_LINE_LENGTH} characters`);
          }
          if (c === PAD) {
            if (this.digits < 2) throw this.invalid('padding inside a base64 group');
            this.pads++;
            this.digits++;
            this.group <<= 6;
          } else {
            const d = c < 128 ? DECODE[c]! : -1;
            if (d < 0) throw this.invalid(`a character that is not base64 (U+${hex(c)})`);
            if (this.pads > 0 || this.padded) throw this.invalid('base64 after padding');
            this.digits++;
            this.group = (this.group << 6) | d;
          }
          if (this.digits === 4) {
            const g = this.group;
            out[o++] = g >> 16;
            if (this.pads < 2) out[o++] = (g >> 8) & 255;
            else if ((g >> 8) & 255) throw this.invalid('padding bits that are not zero');
            if (this.pads < 1) out[o++] = g & 255;
            else if (g & 255) throw this.invalid('padding bits that are not zero');
            this.padded = this.pads > 0;
            this.digits = 0;
            this.group = 0;
            this.pads = 0;
          }
          break;
      }
    }
    return out.slice(0, o);
  }

  finish(): void {
    const ended = this.part === Part.After || (this.part === Part.End && this.at === ARMOR_END.length);
    if (!ended) throw truncated('armored text, before its END line');
    if (this.cr) throw this.invalid('a carriage return not followed by a line feed');
  }

  /** A line feed ended a line (content checked already). */
  private lineBreak(): void {
    switch (this.part) {
      case Part.Begin:
        this.part = Part.Body;
        break;
      case Part.End:
        this.part = Part.After;
        break;
      case Part.After:
        break;
      case Part.Body:
        if (this.length === 0) {
          if (this.bodyLines > 0 || this.emptyBody) throw this.invalid('an empty line in the body');
          this.emptyBody = true;
        } else {
          if (this.digits !== 0) throw this.invalid('a body line whose length is not a multiple of 4');
          this.bodyLines++;
          this.lastDone = this.length < ARMOR_LINE_LENGTH || this.padded;
          this.length = 0;
        }
        break;
    }
    this.line++;
    this.column = 0;
  }

  private notEnd(): FormatError {
    return this.invalid(`a line that is neither base64 nor ${ARMOR_END}`);
  }

  private invalid(what: string): FormatError {
    return armorInvalid(`${what}, at line ${this.line}, column ${this.column}`);
  }
}

const hex = (c: number) => c.toString(16).toUpperCase().padStart(4, '0');

const describe = (v: unknown): string =>
  v === null ? 'null' : typeof v === 'object' ? (v.constructor?.name ?? 'object') : typeof v;

/**
 * The armored text of `bytes` (a ciphertext from `seal`, usually): exactly what `@e4a/pg-js` ≤ 0.10
 * wrote and 2.4 reads. `INVALID_INPUT` if `bytes` is not a Uint8Array.
 */
export function armor(bytes: Uint8Array): string {
  if (!(bytes instanceof Uint8Array)) {
    throw new InputError(ErrorCode.INVALID_INPUT, `armor takes a Uint8Array, got ${describe(bytes)}`);
  }
  const writer = new ArmorWriter();
  return writer.push(bytes) + writer.finish();
}

/**
 * The bytes armored in `text`, read strictly: `text` is one armored block from its BEGIN line on,
 * with nothing after its END line but line breaks. Throws a `FormatError`: `TRUNCATED` if the text
 * stops before the END line, `ARMOR_INVALID` for anything else out of form (with its line and
 * column); `INVALID_INPUT` if `text` is not a string.
 */
export function dearmor(text: string): Uint8Array {
  if (typeof text !== 'string') {
    throw new InputError(ErrorCode.INVALID_INPUT, `dearmor takes a string, got ${describe(text)}`);
  }
  const reader = new ArmorReader();
  const bytes = reader.push(text);
  reader.finish();
  return bytes;
}

/**
 * `armor` as a stream: bytes in (any chunking), text out, the same text as `armor` of all the bytes
 * together. Each chunk of text is whole lines; fewer than 57 bytes wait for the next chunk or the
 * end. A chunk that is not bytes errors the stream with `INVALID_INPUT`.
 */
export function armorStream(): TransformStream<Uint8Array, string> {
  const writer = new ArmorWriter();
  return new TransformStream<Uint8Array, string>({
    transform(chunk, controller) {
      const text = writer.push(asBytes(chunk));
      if (text.length > 0) controller.enqueue(text);
    },
    flush(controller) {
      controller.enqueue(writer.finish());
    },
  });
}

/**
 * `dearmor` as a stream: text in (any chunking, e.g. from a `TextDecoderStream`), bytes out as they
 * decode. Errors the stream as `dearmor` would throw, as soon as the text breaks the form, or at
 * its end if the END line never came. Bytes already passed on before such an error are not
 * vouched for: treat the output as complete only once the stream has closed (a PostGuard unsealer
 * reading it authenticates them anyway). A chunk that is not a string errors the stream with
 * `INVALID_INPUT`.
 */
export function dearmorStream(): TransformStream<string, Uint8Array> {
  const reader = new ArmorReader();
  return new TransformStream<string, Uint8Array>({
    transform(chunk, controller) {
      if (typeof chunk !== 'string') {
        throw new InputError(ErrorCode.INVALID_INPUT, `dearmorStream chunks must be strings, got ${describe(chunk)}`);
      }
      const bytes = reader.push(chunk);
      if (bytes.length > 0) controller.enqueue(bytes);
    },
    flush() {
      reader.finish();
    },
  });
}
