import { h } from './dom.js';

/**
 * Where the client draws a Yivi session (its QR, same-device link, status and Cancel: the
 * postguard-session-* elements of `sign.yivi({ element })` and `decrypt({ element })`), inside the
 * demo's frame: a heading, what the scan is for, and in development the wallet simulator, which
 * plays the phone. The frame shows only while the client has drawn something in it.
 */
export class YiviSlot {
  readonly el: HTMLElement;
  /** Give this to the client as `element`. */
  readonly target: HTMLElement;
  private readonly observer: MutationObserver;

  constructor(heading: string, explanation: string, walletUrl: string | null) {
    this.target = h('div', { class: 'yivi-target' });
    this.el = h(
      'section',
      { class: 'session', hidden: true, 'aria-label': heading },
      h('h2', {}, heading),
      h('p', {}, explanation),
      this.target,
      walletUrl === null
        ? null
        : h(
            'p',
            { class: 'wallet-hint' },
            'No phone at hand? In this development setup the ',
            h('a', { href: walletUrl, target: '_blank', rel: 'noopener' }, 'wallet simulator'),
            ' plays the Yivi app: open it in another tab, press Disclose, then come back here.',
          ),
    );
    // The client empties the element when the session ends; the frame follows.
    this.observer = new MutationObserver(() => this.sync());
    this.observer.observe(this.target, { childList: true });
  }

  private sync(): void {
    const showing = this.target.childElementCount > 0;
    this.el.hidden = !showing;
    if (showing) this.el.scrollIntoView({ block: 'nearest' });
  }
}
