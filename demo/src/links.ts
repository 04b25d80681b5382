/**
 * The receive page's link: `receive.html?uuid=…&recipient=…`, and Cryptify's mail link
 * (`/download?uuid=…&recipient=…`) or a bare upload id pasted by hand. The link is the recipient's
 * capability to fetch the file, so only a well-formed id is taken from it.
 */

const UPLOAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** An e-mail address as the receive page takes one from a link: a hint, checked against the file's recipients later. */
const ADDRESS = /^[^\s@]{1,64}@[^\s@]{1,255}$/;

export interface ReceiveLink {
  uuid: string;
  /** Whom the link was mailed to, if it says. */
  recipient: string | undefined;
}

/** The upload id and recipient from a link's query, a whole URL, or a bare id; undefined if none. */
export function parseReceiveLink(text: string, base = 'http://invalid/'): ReceiveLink | undefined {
  const trimmed = text.trim();
  if (UPLOAD_ID.test(trimmed)) return { uuid: trimmed.toLowerCase(), recipient: undefined };
  let url: URL;
  try {
    url = new URL(trimmed, base);
  } catch {
    return undefined;
  }
  const uuid = url.searchParams.get('uuid')?.trim() ?? '';
  if (!UPLOAD_ID.test(uuid)) return undefined;
  const recipient = url.searchParams.get('recipient')?.trim();
  return {
    uuid: uuid.toLowerCase(),
    recipient: recipient !== undefined && ADDRESS.test(recipient) ? recipient : undefined,
  };
}

/** The link the send page offers: the receive page beside `pageUrl`, for the upload and one recipient. */
export function receiveLink(pageUrl: string, uuid: string, recipient: string | undefined): string {
  const url = new URL('receive.html', pageUrl);
  url.searchParams.set('uuid', uuid);
  if (recipient !== undefined) url.searchParams.set('recipient', recipient);
  return url.href;
}
