// The service-worker pipe's own ceiling, for npm run bench:browser: a response body made of
// zero-filled chunks (`?chunk=` bytes each, 256 KiB by default), no other work, with a queue of
// `?hwm=` chunks (0 by default: made only as the browser pulls, as the decrypter's body is). Scope
// /pipe/ only, so the decrypting service worker keeps controlling the benchmark page; a frame at
// /pipe/ fetches through this one.
//
// `?form=` picks how the body is made (--pipe-forms), so that the decrypter's form can be weighed
// against every other form a service worker could answer with:
//   pull         a default ReadableStream whose pull enqueues a fresh chunk (the decrypter's form)
//   push         the same, every chunk enqueued at once in start (no pull round trips at all)
//   bytes        a `type: 'bytes'` stream whose pull enqueues a fresh chunk
//   byob         a `type: 'bytes'` stream with autoAllocateChunkSize: pull fills the BYOB request's view
//   transform    an identity TransformStream; a producer writes fresh chunks into its writable side,
//                waiting on each write (or, with a queue of `hwm` chunks on the writable side, on
//                writer.ready)
//   blob         a Blob the worker builds from its own `chunk`-byte parts, answered as the Blob
//   blob-parts   the same, but each part made a Blob of its own as soon as it is made (the bytes go to
//                the browser's Blob store as they come, as a first reading keeping its plaintext would
//                hand them over), and the answer a Blob of those Blobs
//   blob-stream  the Blob of `blob`, answered as blob.stream()
//   buffer       one ArrayBuffer of the whole body, answered as it is
//   cache        the Blob of `blob-parts` put into Cache Storage and answered with cache.match's
//                response (a body the browser reads from its own store, not through this worker's
//                JavaScript); put again on every request, so its time is in the first byte
// For the forms that build the body first, the response's x-build-ms header says how long the
// building took (the rest of the time is the serving).
self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) =>
  event.waitUntil(Promise.all([self.clients.claim(), caches.delete('pipe-bench')])),
);

const HEADERS = { 'content-type': 'application/octet-stream' };

function pullBody(left, chunk, hwm) {
  return new ReadableStream(
    {
      pull(controller) {
        if (left <= 0) return controller.close();
        const n = Math.min(chunk, left);
        left -= n;
        controller.enqueue(new Uint8Array(n));
      },
    },
    { highWaterMark: hwm },
  );
}

function pushBody(left, chunk) {
  return new ReadableStream({
    start(controller) {
      for (; left > 0; left -= chunk) controller.enqueue(new Uint8Array(Math.min(chunk, left)));
      controller.close();
    },
  });
}

function bytesBody(left, chunk, hwm) {
  return new ReadableStream(
    {
      type: 'bytes',
      pull(controller) {
        if (left <= 0) return controller.close();
        const n = Math.min(chunk, left);
        left -= n;
        controller.enqueue(new Uint8Array(n));
      },
    },
    { highWaterMark: hwm * chunk },
  );
}

function byobBody(left, chunk, hwm) {
  return new ReadableStream(
    {
      type: 'bytes',
      autoAllocateChunkSize: chunk,
      pull(controller) {
        if (left <= 0) {
          controller.close();
          // A BYOB request still open after close must be answered with 0 bytes.
          controller.byobRequest?.respond(0);
          return;
        }
        const request = controller.byobRequest;
        if (request === null || request === undefined) {
          // No reader's buffer to fill (an engine that reads with a default reader and no auto-allocation).
          const n = Math.min(chunk, left);
          left -= n;
          controller.enqueue(new Uint8Array(n));
          return;
        }
        const view = request.view;
        const n = Math.min(view.byteLength, left);
        // A decrypter would write its plaintext here; zeros stand for it (the view may be reused).
        new Uint8Array(view.buffer, view.byteOffset, n).fill(0);
        left -= n;
        request.respond(n);
      },
    },
    { highWaterMark: hwm * chunk },
  );
}

function transformBody(left, chunk, hwm) {
  const { readable, writable } = new TransformStream(undefined, { highWaterMark: hwm });
  const writer = writable.getWriter();
  void (async () => {
    for (; left > 0; left -= chunk) {
      const written = writer.write(new Uint8Array(Math.min(chunk, left)));
      // A writable side with no queue is never ready: wait for the write itself (taken once the
      // browser reads), so that the producer makes a chunk only as it is wanted, as `pull` does.
      await (hwm > 0 ? writer.ready : written);
    }
    await writer.close();
  })().catch((error) => writer.abort(error));
  return readable;
}

function blobOf(left, chunk, eachABlob = false) {
  const parts = [];
  for (; left > 0; left -= chunk) {
    const part = new Uint8Array(Math.min(chunk, left));
    parts.push(eachABlob ? new Blob([part]) : part);
  }
  return new Blob(parts, { type: HEADERS['content-type'] });
}

self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (!url.pathname.startsWith('/pipe/bytes/')) return;
  const left = Number(url.pathname.slice('/pipe/bytes/'.length));
  const chunk = Number(url.searchParams.get('chunk') ?? 256 * 1024);
  const hwm = Number(url.searchParams.get('hwm') ?? 0);
  const form = url.searchParams.get('form') ?? 'pull';
  const start = performance.now();
  const built = (body) => {
    const headers = { ...HEADERS, 'x-build-ms': String(performance.now() - start) };
    return new Response(body, { headers });
  };
  try {
    switch (form) {
      case 'pull':
        return event.respondWith(new Response(pullBody(left, chunk, hwm), { headers: HEADERS }));
      case 'push':
        return event.respondWith(built(pushBody(left, chunk)));
      case 'bytes':
        return event.respondWith(new Response(bytesBody(left, chunk, hwm), { headers: HEADERS }));
      case 'byob':
        return event.respondWith(new Response(byobBody(left, chunk, hwm), { headers: HEADERS }));
      case 'transform':
        return event.respondWith(new Response(transformBody(left, chunk, hwm), { headers: HEADERS }));
      case 'blob': {
        const blob = blobOf(left, chunk);
        return event.respondWith(built(blob));
      }
      case 'blob-parts':
        return event.respondWith(built(blobOf(left, chunk, true)));
      case 'blob-stream': {
        const blob = blobOf(left, chunk);
        return event.respondWith(built(blob.stream()));
      }
      case 'buffer': {
        const buffer = new Uint8Array(left);
        return event.respondWith(built(buffer));
      }
      case 'cache':
        return event.respondWith(
          (async () => {
            const cache = await caches.open('pipe-bench');
            const key = `/pipe/cached/${left}`;
            await cache.put(key, new Response(blobOf(left, chunk, true), { headers: HEADERS }));
            return (await cache.match(key)) ?? new Response('not cached', { status: 500 });
          })(),
        );
      default:
        return event.respondWith(new Response(`unknown form ${form}`, { status: 400 }));
    }
  } catch (error) {
    // A form this engine does not have (a constructor that throws): say so rather than fall through.
    event.respondWith(new Response(`form ${form}: ${String(error)}`, { status: 501 }));
  }
});
