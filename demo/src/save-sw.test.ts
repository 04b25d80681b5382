import { describe, expect, it } from 'vitest';
import { MESSAGE_SAVE, type SaveEvent, type SaveRequest } from './save-protocol.js';
import { installSaver, type SaverOptions } from './save-sw.js';

/**
 * The demo's saver in Node, behind a minimal ServiceWorkerGlobalScope (an EventTarget with
 * `registration.scope`): the page's stream becomes a download, and a page that goes away
 * mid-download fails it instead of leaving the browser's download "in progress" for good.
 */

const SCOPE = 'https://demo.example/';

function saver(options: SaverOptions) {
  const scope = Object.assign(new EventTarget(), { registration: { scope: SCOPE } });
  installSaver(scope as unknown as ServiceWorkerGlobalScope, options);

  async function save(source: ReadableStream<Uint8Array>) {
    const { port1, port2 } = new MessageChannel();
    const events: SaveEvent[] = [];
    const registered = new Promise<SaveEvent>((resolve) => {
      port1.onmessage = ({ data }: MessageEvent<SaveEvent>) => {
        events.push(data);
        if (data.type === 'registered') resolve(data);
      };
    });
    const request: SaveRequest = { source: { kind: 'stream', stream: source }, filename: 'letter.txt.enc' };
    scope.dispatchEvent(
      Object.assign(new Event('message'), { data: { type: MESSAGE_SAVE, request }, ports: [port2], waitUntil() {} }),
    );
    const reply = await registered;
    if (reply.type !== 'registered' || !reply.ok) throw new Error('not registered');
    let response: Promise<Response> | undefined;
    scope.dispatchEvent(
      Object.assign(new Event('fetch'), {
        request: new Request(reply.url),
        respondWith: (r: Response | Promise<Response>) => (response = Promise.resolve(r)),
        waitUntil() {},
      }),
    );
    return { response: await response!, events, close: () => port1.close() };
  }
  return { save };
}

/** A page that sent `first` and then went away without a word (a reload, a closed tab). */
function pageThatVanishes(first: Uint8Array): { stream: ReadableStream<Uint8Array>; cancelled: Promise<unknown> } {
  let cancelled!: (reason: unknown) => void;
  const reason = new Promise((resolve) => (cancelled = resolve));
  let sent = false;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (!sent) {
        sent = true;
        controller.enqueue(first);
      }
      // and then nothing, ever
    },
    cancel: (r) => cancelled(r),
  });
  return { stream, cancelled: reason };
}

describe('the demo saver', () => {
  it('streams the page bytes into the download and says done', async () => {
    const bytes = new TextEncoder().encode('sealed bytes');
    const { response, events, close } = await saver({ stallMs: 5_000 }).save(
      new ReadableStream({
        start(c) {
          c.enqueue(bytes);
          c.close();
        },
      }),
    );
    expect(response.headers.get('content-disposition')).toContain('letter.txt.enc');
    expect(new Uint8Array(await response.arrayBuffer())).toEqual(bytes);
    await expect.poll(() => events.at(-1)).toEqual({ type: 'done', bytes: bytes.length });
    close();
  });

  it('a page that goes away mid-download fails the download after the stall time (it stayed "in progress")', async () => {
    const page = pageThatVanishes(new Uint8Array(1000).fill(7));
    const { response, events, close } = await saver({ stallMs: 300 }).save(page.stream);
    const reader = response.body!.getReader();
    expect((await reader.read()).value?.length).toBe(1000);
    const started = Date.now();
    await expect(reader.read()).rejects.toThrow(/sent nothing for 0.3 s/);
    expect(Date.now() - started).toBeLessThan(10_000);
    // The page's stream is cancelled too (should it still be there), and the page is told.
    await expect(page.cancelled).resolves.toBeInstanceOf(Error);
    await expect.poll(() => events.at(-1)?.type).toBe('error');
    close();
  });

  it('a browser that reads slowly is backpressure, not a stall', async () => {
    const chunks = 5;
    let made = 0;
    const { response, close } = await saver({ stallMs: 200 }).save(
      new ReadableStream<Uint8Array>(
        {
          pull(c) {
            if (made++ < chunks) c.enqueue(new Uint8Array(10));
            else c.close();
          },
        },
        { highWaterMark: 0 },
      ),
    );
    const reader = response.body!.getReader();
    let total = 0;
    for (;;) {
      // The reader pauses longer than the stall time between reads: the page is not to blame.
      await new Promise((resolve) => setTimeout(resolve, 400));
      const { done, value } = await reader.read();
      if (done) break;
      total += value.length;
    }
    expect(total).toBe(chunks * 10);
    close();
  });
});
