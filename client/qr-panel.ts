import type { IdentitySession } from '../lib/pkg/session.js';
import type { SessionStatus } from '../lib/pkg/jwt.js';
import type { ElementLike } from '../lib/web-types.js';
import { invalidInput } from './errors.js';

/**
 * The Yivi step drawn into an element the app gives (`element` in `sign.yivi` and `decrypt`): a QR
 * code, a link that opens the Yivi app on this device, the session's status, and Cancel. No vendor
 * widget and no styles beyond class names (`postguard-session`, `-qr`, `-link`, `-status`,
 * `-cancel`), so the app's CSS decides how it looks.
 */

const STATUS_TEXT: Record<SessionStatus, string> = {
  INITIALIZED: 'Scan the QR code with the Yivi app',
  PAIRING: 'Enter the pairing code shown in the Yivi app',
  CONNECTED: 'Confirm in the Yivi app',
  DONE: 'Done',
  CANCELLED: 'Cancelled',
  TIMEOUT: 'Timed out',
};

function resolveElement(target: string | ElementLike): Element {
  // A DOM Element in a page (sign.yivi and decrypt check it); typed by shape for Node's declarations.
  if (typeof target !== 'string') return target as unknown as Element;
  const found = typeof document === 'undefined' ? null : document.querySelector(target);
  if (found === null) throw invalidInput(`element: nothing matches ${JSON.stringify(target)}`);
  return found;
}

/**
 * Shows `session` in `target` until the returned function is called (it empties the element again).
 * The QR code's drawing (the qrcode package) is loaded on first use, so it is no part of a page's
 * first chunk: the panel, its link and its status show at once, the code as soon as it is drawn.
 */
export function showSessionIn(target: string | ElementLike, session: IdentitySession): () => void {
  const host = resolveElement(target);
  const make = (tag: string, className: string, text?: string): HTMLElement => {
    const el = document.createElement(tag);
    el.className = `postguard-session-${className}`;
    if (text !== undefined) el.textContent = text;
    return el;
  };
  const box = make('div', 'box');
  box.className = 'postguard-session';
  const qr = make('div', 'qr');
  qr.setAttribute('role', 'img');
  qr.setAttribute('aria-label', 'QR code to scan with the Yivi app');
  let shown = true;
  // qrSvg builds the SVG from the QR modules alone: no text of the session is embedded as markup.
  // A load that fails leaves the link, which opens the session as the code does.
  void import('../lib/pkg/qr.js').then(
    ({ qrSvg }) => {
      if (shown) qr.innerHTML = qrSvg(session.qrText);
    },
    () => undefined,
  );
  const link = make('a', 'link', 'Open the Yivi app on this device') as HTMLAnchorElement;
  link.href = session.sameDeviceLink;
  const status = make('p', 'status', STATUS_TEXT[session.status]);
  status.setAttribute('role', 'status');
  status.setAttribute('aria-live', 'polite');
  const cancel = make('button', 'cancel', 'Cancel') as HTMLButtonElement;
  cancel.type = 'button';
  cancel.addEventListener('click', () => void session.cancel());
  box.append(qr, link, status, cancel);
  host.replaceChildren(box);
  const unsubscribe = session.onStatus((s) => {
    status.textContent = STATUS_TEXT[s];
  });
  return () => {
    shown = false;
    unsubscribe();
    if (box.parentNode === host) host.replaceChildren();
  };
}
