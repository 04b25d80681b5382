import { ErrorCode, type PostGuardError } from '../errors.js';
import { judgeRangedAnswer, spanMismatch, wholeSize, type RangedAnswer, type SeenSpan } from './ranged-answer.js';
import { readExactly, send, sourceFailed, type RangedUrlFetch, type Sent } from './request.js';
import { selfBounded, type ByteSource } from './sources.js';
import { stallOption } from './waits.js';

/**
 * A URL as a {@link ByteSource}: each read one `Range: bytes=a-b` GET, its answer judged once
 * (ranged-answer.ts), its body read exactly (request.ts). Opening probes the first 64 KiB, which
 * later reads of those bytes reuse; cross-origin, where only the status and Content-Length are
 * readable, the file's size comes from a HEAD (or a plain GET dropped at its headers).
 */

/** How a URL source is fetched, and how long and until when its reads may wait. */
export interface RangedUrlOptions extends RangedUrlFetch {
  /**
   * How long a request may wait for its answer, and then its body may go without 16 KiB (or its
   * end), before it fails with SOURCE_FAILED (default 30 s): a server that drips stalls too.
   */
  stallMs?: number;
  /** Ends every request, pending and future, with CANCELLED. */
  signal?: AbortSignal;
}

/** What the first request of a URL source asks for: the framing of most files, and segment 0's start. */
const PROBE_BYTES = 64 * 1024;

const WHAT = 'the ciphertext URL';

/** What every request of one URL source shares. */
interface Line {
  url: string | URL;
  fetching: RangedUrlFetch;
  stallMs: number;
  signal: AbortSignal | undefined;
}

/** Why a URL cannot be read by ranges, or the source it gives. */
export type RangedUrlProbe = { source: ByteSource; refusal?: undefined } | { source?: undefined; refusal: string };

/** One ranged GET of `length` bytes from `offset`, its answer judged. */
async function ranged(line: Line, offset: number, length: number, signal?: AbortSignal) {
  const sent = await send(line.url, line.fetching, {
    range: `bytes=${offset}-${offset + length - 1}`,
    signals: [line.signal, signal],
    answerMs: line.stallMs,
    what: WHAT,
  });
  return { sent, answer: judgeRangedAnswer(sent.response) };
}

const body = (line: Line, sent: Sent, offset: number, length: number) =>
  readExactly(sent, length, { idleMs: line.stallMs, offset, what: WHAT });

/** Why `answer` is not a span, in words. */
const notSpan = (answer: RangedAnswer, status: number): string =>
  answer.kind === 'refused' ? answer.why : `it answered a range request with HTTP ${status}`;

/**
 * The file's size when no Content-Range is readable: the Content-Length of a HEAD, else of a
 * plain GET whose body is dropped as soon as its headers are in (a host may refuse HEAD).
 */
async function totalSize(line: Line): Promise<number | undefined> {
  for (const method of ['HEAD', 'GET'] as const) {
    let sent: Sent;
    try {
      sent = await send(line.url, line.fetching, {
        method,
        signals: [line.signal],
        answerMs: line.stallMs,
        what: WHAT,
      });
    } catch (error) {
      if (method === 'HEAD' && (error as PostGuardError).code === ErrorCode.SOURCE_FAILED) continue;
      throw error;
    }
    await sent.end();
    const total = wholeSize(sent.response);
    if (total !== undefined) return total;
  }
  return undefined;
}

/** The first bytes and the file's size from the probe's answer (a span from 0), or a refusal. */
async function probed(line: Line, sent: Sent, span: SeenSpan): Promise<{ head: Uint8Array; size: number } | string> {
  if (span.total !== undefined) {
    const expected = Math.min(PROBE_BYTES, span.total);
    if (span.length !== expected) {
      await sent.end();
      throw sourceFailed(
        `${WHAT} answered bytes 0-${span.length - 1}/${span.total} to a request for 0-${expected - 1}`,
      );
    }
    return { head: await body(line, sent, 0, expected), size: span.total };
  }
  // Cross-origin: the part's length is all a 206 shows; the file's comes from a request of its own.
  const part = span.length;
  if (part === 0 || part > PROBE_BYTES) {
    await sent.end();
    throw sourceFailed(`${WHAT} answered ${part} bytes to a request for 0-${PROBE_BYTES - 1}`);
  }
  const head = await body(line, sent, 0, part);
  const size = await totalSize(line);
  if (size === undefined)
    return 'no Content-Range is readable and no plain request tells the file size (Content-Length)';
  if (part !== Math.min(PROBE_BYTES, size))
    throw sourceFailed(
      `${WHAT} answered ${part} bytes to a request for 0-${PROBE_BYTES - 1} of a ${size}-byte file (the file changed?)`,
    );
  return { head, size };
}

/** The source of a URL whose first `head.length` bytes are in hand: every other read one ranged GET. */
function spanSource(line: Line, size: number, head: Uint8Array): ByteSource {
  return selfBounded({
    size,
    async read(offset, length, signal) {
      if (offset + length <= head.length) return head.slice(offset, offset + length);
      const { sent, answer } = await ranged(line, offset, length, signal);
      const why =
        answer.kind === 'span'
          ? spanMismatch(answer.span, { offset, length, total: size })
          : `stopped answering ranges: ${notSpan(answer, sent.response.status)}`;
      if (why !== undefined) {
        await sent.end();
        throw sourceFailed(`${WHAT} ${why}`);
      }
      return body(line, sent, offset, length);
    },
  });
}

/** Opens `url` as a source, or says why its server cannot be read by ranges. */
export async function probeRangedUrl(url: string | URL, options: RangedUrlOptions): Promise<RangedUrlProbe> {
  const stallMs = stallOption(options.stallMs);
  const { signal, stallMs: _, ...fetching } = options;
  const line: Line = { url, fetching, stallMs, signal };
  const { sent, answer } = await ranged(line, 0, PROBE_BYTES);
  if (answer.kind === 'unsatisfiable' && (!answer.readable || answer.total === 0)) {
    // An empty file: no range of it exists. Its reads fail as the framing's (TRUNCATED/NOT_POSTGUARD).
    await sent.end();
    return { source: { size: 0, read: () => Promise.resolve(new Uint8Array(0)) } };
  }
  if (answer.kind !== 'span' || (answer.span.start ?? 0) !== 0) {
    await sent.end();
    return {
      refusal:
        answer.kind === 'span'
          ? `it answered bytes ${answer.span.start}- to a request from 0`
          : notSpan(answer, sent.response.status),
    };
  }
  const head = await probed(line, sent, answer.span);
  return typeof head === 'string' ? { refusal: head } : { source: spanSource(line, head.size, head.head) };
}

/**
 * A URL as a source, read by `Range: bytes=a-b` requests; undefined when the server does not
 * answer ranges: a first request answered with anything but a 206 whose bytes are not re-encoded
 * (Content-Encoding). Fetch the whole file then (`StreamUnsealer`). Works cross-origin against a
 * host that exposes no header (Cryptify exposes only `cryptifytoken`): each answer is then judged
 * by its status and Content-Length, and the file's size is taken from a HEAD (or, where HEAD is
 * refused, a plain GET dropped once its headers are in); a readable Content-Range must agree.
 * Throws SOURCE_FAILED when a request fails, an answer does not come within `stallMs`, a body
 * brings less than 16 KiB in `stallMs`, or an answer is not the span asked for (the file changed),
 * CANCELLED when `signal` aborts. The first request asks for 64 KiB (the framing of most files),
 * which later reads of those bytes reuse.
 */
export async function rangedUrlSource(
  url: string | URL,
  options: RangedUrlOptions = {},
): Promise<ByteSource | undefined> {
  return (await probeRangedUrl(url, options)).source;
}
