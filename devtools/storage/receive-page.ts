/**
 * GET /standin/receive?uuid=…&recipient=…: where pg-dev's notification mails lead when no app's
 * receive page was given (`pg-dev --public-url`). A person who follows such a link lands on a page
 * that says what the link is and the three ways to open the file, rather than on postguard.eu,
 * which knows nothing of uploads on this machine.
 */

const UPLOAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export interface ReceivePageInput {
  /** The upload id from the link, if any (anything but an upload id is ignored). */
  uuid: string | undefined;
  /** Whom the mail went to, as the link says. */
  recipient: string | undefined;
  /** This server's own URL (for the download route). */
  storageUrl: string;
  /** The PKG the server checks uploads with, if configured. */
  pkgUrl: string | undefined;
}

/** The page, as HTML (every value from the link escaped). */
export function receivePage(input: ReceivePageInput): string {
  const uuid = input.uuid !== undefined && UPLOAD_ID.test(input.uuid) ? input.uuid.toLowerCase() : undefined;
  const id = uuid ?? '<uuid>';
  const pkg = input.pkgUrl ?? '<PKG URL>';
  const forWhom =
    input.recipient === undefined || input.recipient === '' ? '' : ` for <b>${escapeHtml(input.recipient)}</b>`;
  const code = (text: string) => `<code>${escapeHtml(text)}</code>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>A PostGuard file is waiting (pg-dev)</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 44rem; margin: 2rem auto; padding: 0 1rem; color: #1d2430; }
  h1 { font-size: 1.4rem; }
  code { background: #eef1f5; padding: 0.1rem 0.3rem; border-radius: 3px; font-size: 0.9em; word-break: break-all; }
  li { margin: 0.6rem 0; }
  .note { color: #5a6473; font-size: 0.9rem; }
</style>
</head>
<body>
<h1>A PostGuard file is waiting${forWhom}</h1>
<p>${uuid === undefined ? 'This link names no upload.' : `Upload ${code(uuid)} is stored by pg-dev's storage stand-in on this machine.`}
This page is pg-dev's own: the mail links here because pg-dev was started without
${code('--public-url')}, the receive page of the app that sends.</p>
<p>To open the file:</p>
<ol>
<li><b>In your app</b>: start pg-dev with ${code('--public-url https://your-app.example/receive.html')};
mails then link to that page with ${code('?uuid=…&recipient=…')} added, and the page opens the file with
${code(`pg.open({ uuid: '${id}' }).decrypt(…)`)} (postguard-ts/client).</li>
<li><b>With the demo</b> of the postguard-ts repository (${code('npm start')}): its receive page takes the
upload id (${code(id)}).</li>
<li><b>With pg-cli</b>: download the ciphertext from ${code(`${input.storageUrl}/filedownload/${id}`)}, then
${code(`pg-cli dec -p ${pkg} <file>`)} (a bundle of files opens as a ZIP).</li>
</ol>
<p class="note">The recipient proves their e-mail address with the stand-in's simulated wallet page
(${code('/standin/wallet')} on the stand-in Yivi server) where a phone would scan a QR code.</p>
</body>
</html>
`;
}
