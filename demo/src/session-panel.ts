import { qrSvg, type IdentitySession, type SessionStatus } from 'postguard-ts/worker';
import { h } from './dom.js';

/**
 * The Yivi step: a QR code to scan with the Yivi app, a link that opens the app on this device,
 * and (in development) a link to the stand-in's wallet simulator, which plays the phone on a
 * laptop. Shows the session's status as it moves and offers Cancel.
 */

const STATUS_TEXT: Record<SessionStatus, string> = {
  INITIALIZED: 'Waiting for you to scan the QR code…',
  PAIRING: 'Enter the pairing code shown in the Yivi app…',
  CONNECTED: 'Scanned. Confirm in the Yivi app…',
  DONE: 'Done.',
  CANCELLED: 'Cancelled.',
  TIMEOUT: 'Timed out.',
};

export class SessionPanel {
  readonly el: HTMLElement;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly heading: string,
    private readonly explanation: string,
    private readonly walletUrl: string | null,
  ) {
    this.el = h('section', { class: 'session', hidden: true, 'aria-labelledby': 'session-heading' });
  }

  show(session: IdentitySession): void {
    this.unsubscribe?.();
    const status = h(
      'p',
      { class: 'session-status', role: 'status', 'aria-live': 'polite' },
      STATUS_TEXT[session.status],
    );
    const qr = h('div', { class: 'qr', role: 'img', 'aria-label': 'QR code to scan with the Yivi app' });
    // qrSvg escapes what it embeds; the SVG holds only a path built from the QR modules.
    qr.innerHTML = qrSvg(session.qrText);
    const cancel = h('button', { type: 'button', class: 'secondary', onclick: () => void session.cancel() }, 'Cancel');
    this.el.replaceChildren(
      h('h2', { id: 'session-heading' }, this.heading),
      h('p', {}, this.explanation),
      h(
        'div',
        { class: 'session-body' },
        qr,
        h(
          'div',
          { class: 'session-links' },
          h(
            'p',
            {},
            h('a', { href: session.sameDeviceLink, class: 'button-link' }, 'Open the Yivi app on this device'),
          ),
          this.walletUrl === null
            ? null
            : h(
                'p',
                { class: 'wallet-hint' },
                'No phone at hand? In this development setup the ',
                h('a', { href: this.walletUrl, target: '_blank', rel: 'noopener' }, 'wallet simulator'),
                ' plays the Yivi app: open it in another tab, press Disclose, then come back here.',
              ),
          status,
          cancel,
        ),
      ),
    );
    this.el.hidden = false;
    this.unsubscribe = session.onStatus((s) => {
      status.textContent = STATUS_TEXT[s];
    });
    this.el.scrollIntoView({ block: 'nearest' });
  }

  hide(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.el.hidden = true;
    this.el.replaceChildren();
  }
}
