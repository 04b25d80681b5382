import { blobSource, openRandomAccess, rangedUrlSource, type RandomAccessFile } from '../lib/random-access.js';
import { contentRange, parseRange, unsatisfiedRange } from './http-range.js';
import { failureResponse, plaintextHeaders } from './sw-headers.js';
import { post, type Registration } from './sw-registry.js';
import type { WholeContext } from './sw-whole.js';
import { respondWhole } from './sw-whole.js';

/**
 * A seekable registration's Range requests and HEADs, answered from the library's random access
 * (lib/random-access.ts): only the segments that hold a range are read, each authenticated under
 * the file's key before its bytes go out. What a range gives is weaker than a whole response's
 * answer (worker/README.md): the sender's signatures are not verified, since each signs the
 * transcript of all the plaintext before it, so the page hears the sender as a claim.
 */

/**
 * The registration's file, opened once (segment 0 and the final segment authenticated, the exact
 * length known) and kept for its other requests; undefined when the source does not seek (a URL
 * whose server does not answer ranges readably), an error response (the registration ended) when
 * nothing of the file can be served.
 */
async function seekableFile(entry: Registration, ctx: WholeContext): Promise<RandomAccessFile | undefined | Response> {
  const { request: r, abort } = entry;
  const { fetch, stallMs } = ctx.settings;
  const signal = abort.signal;
  entry.file ??= (async () => {
    const source =
      r.source.kind === 'blob'
        ? blobSource(r.source.blob)
        : r.source.kind === 'url'
          ? await rangedUrlSource(r.source.url, {
              ...(r.source.headers !== undefined ? { headers: r.source.headers } : {}),
              credentials: r.source.credentials ?? 'same-origin',
              fetch,
              signal,
              stallMs,
            })
          : undefined;
    if (source === undefined) return undefined;
    return openRandomAccess(source, { vk: r.vk, recipientId: r.recipientId, usk: r.usk, signal, stallMs });
  })();
  try {
    return await entry.file;
  } catch (error) {
    // A wrong key, a damaged segment 0 or final segment.
    ctx.registry.end(entry, error);
    return failureResponse(error);
  }
}

/**
 * HEAD of a seekable registration: what a GET without Range would send, without the body (a
 * player may ask for the length and whether it can seek before it reads). The length needs
 * segment 0 and the final segment, as a range does.
 */
export async function respondHead(entry: Registration, ctx: WholeContext): Promise<Response> {
  const file = await seekableFile(entry, ctx);
  if (file instanceof Response) return new Response(null, { status: file.status, headers: file.headers });
  const headers = plaintextHeaders(entry.request, 'complete', file !== undefined);
  if (file !== undefined) headers.set('content-length', String(file.size));
  return new Response(null, { status: 200, headers });
}

/**
 * A Range request of a seekable registration: 206 with the segments that hold the range; 416 for
 * a range past the end; the whole file (200) when the source turns out not to seek.
 */
export async function respondRange(
  entry: Registration,
  range: string,
  ctx: WholeContext,
  lifetime: (p: Promise<unknown>) => void,
): Promise<Response> {
  const file = await seekableFile(entry, ctx);
  if (file instanceof Response) return file;
  if (file === undefined) return respondWhole(entry, ctx, lifetime, false);
  const answer = parseRange(range, file.size);
  if (answer.kind === 'full') return respondWhole(entry, ctx, lifetime);
  if (answer.kind === 'unsatisfiable') {
    return new Response(null, {
      status: 416,
      headers: { 'content-range': unsatisfiedRange(file.size), 'accept-ranges': 'bytes', 'cache-control': 'no-store' },
    });
  }
  const { start, end: last } = answer;
  post(entry.reply, { type: 'range', start, end: last, total: file.size, sender: file.sender });
  const headers = plaintextHeaders(entry.request, 'segments', true);
  headers.set('content-range', contentRange(start, last, file.size));
  headers.set('content-length', String(last - start + 1));
  return new Response(rangeBody(entry, ctx, file.range(start, last + 1, { signal: entry.abort.signal }), lifetime), {
    status: 206,
    headers,
  });
}

/**
 * A range's body, pulled as the browser reads. A failure errors it and ends the registration (the
 * page hears why: TAMPERED, …); the registration ending errors it; a reader that cancels (a
 * media element that moved on) ends this response, not the registration.
 */
function rangeBody(
  entry: Registration,
  ctx: WholeContext,
  pieces: AsyncGenerator<Uint8Array, void, undefined>,
  lifetime: (p: Promise<unknown>) => void,
): ReadableStream<Uint8Array> {
  let settle!: () => void;
  lifetime(new Promise<void>((resolve) => (settle = resolve)));
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  let over = false;
  const finish = () => {
    over = true;
    entry.abort.signal.removeEventListener('abort', onEnd);
    settle();
  };
  const onEnd = () => {
    controller?.error(entry.abort.signal.reason);
    finish();
    void pieces.return().catch(() => undefined);
  };
  entry.abort.signal.addEventListener('abort', onEnd, { once: true });
  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
      },
      async pull(c) {
        let next: IteratorResult<Uint8Array, void>;
        try {
          next = await pieces.next();
        } catch (error) {
          if (over) return;
          c.error(error);
          finish();
          ctx.registry.end(entry, error);
          return;
        }
        if (over) return;
        if (next.done) {
          c.close();
          finish();
        } else c.enqueue(next.value);
      },
      async cancel() {
        finish();
        await pieces.return().catch(() => undefined);
      },
    },
    { highWaterMark: 0 },
  );
}
