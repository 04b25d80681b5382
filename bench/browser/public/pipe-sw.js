// The service-worker pipe's own ceiling, for npm run bench:browser: a response body made of
// zero-filled chunks (`?chunk=` bytes each, 256 KiB by default), no other work, with a queue of
// `?hwm=` chunks (0 by default: made only as the browser pulls, as the decrypter's body is). Scope
// /pipe/ only, so the decrypting service worker keeps controlling the benchmark page; a frame at
// /pipe/ fetches through this one.
self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (!url.pathname.startsWith('/pipe/bytes/')) return;
  let left = Number(url.pathname.slice('/pipe/bytes/'.length));
  const chunk = Number(url.searchParams.get('chunk') ?? 256 * 1024);
  const hwm = Number(url.searchParams.get('hwm') ?? 0);
  const body = new ReadableStream(
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
  event.respondWith(new Response(body, { headers: { 'content-type': 'application/octet-stream' } }));
});
