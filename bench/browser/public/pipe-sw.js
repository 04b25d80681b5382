// The service-worker pipe's own ceiling, for npm run bench:browser: a response body made of
// zero-filled 256 KiB chunks, no other work. Scope /pipe/ only, so the decrypting service worker
// keeps controlling the benchmark page; a frame at /pipe/ fetches through this one.
self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
self.addEventListener('fetch', (event) => {
  const url = new URL(event.request.url);
  if (!url.pathname.startsWith('/pipe/bytes/')) return;
  let left = Number(url.pathname.slice('/pipe/bytes/'.length));
  const chunk = 256 * 1024;
  const body = new ReadableStream(
    {
      pull(controller) {
        if (left <= 0) return controller.close();
        const n = Math.min(chunk, left);
        left -= n;
        controller.enqueue(new Uint8Array(n));
      },
    },
    { highWaterMark: 0 },
  );
  event.respondWith(new Response(body, { headers: { 'content-type': 'application/octet-stream' } }));
});
