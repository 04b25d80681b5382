import { describe, expect, it } from 'vitest';
import { BATCH_BYTES, WINDOW_BYTES } from './port-stream.js';
import { DEFAULT_RELAY, WEBKIT_RELAY, isWebKit, relaySettings } from './relay-settings.js';

/** The crypto worker's relay settings by engine (relay-settings.ts), from real user agents. */

const UA = {
  webkitGtk: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/60.5 Safari/605.1.15',
  safari:
    'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15',
  iosChrome:
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/126.0.6478.54 Mobile/15E148 Safari/604.1',
  chromium: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36',
  headlessChrome:
    'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0 Safari/537.36',
  edge: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0',
  firefox: 'Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0',
};

describe('relay settings', () => {
  it('gives WebKit (Safari, WebKitGTK, any iOS browser) larger batches in a larger window', () => {
    for (const ua of [UA.webkitGtk, UA.safari, UA.iosChrome]) {
      expect(isWebKit(ua)).toBe(true);
      expect(relaySettings(ua)).toBe(WEBKIT_RELAY);
    }
    expect(WEBKIT_RELAY.batchBytes).toBeGreaterThan(BATCH_BYTES);
    expect(WEBKIT_RELAY.windowBytes).toBeGreaterThan(WINDOW_BYTES);
  });

  it('keeps the relay’s defaults in Blink and Gecko, and where there is no browser', () => {
    for (const ua of [UA.chromium, UA.headlessChrome, UA.edge, UA.firefox, '']) {
      expect(isWebKit(ua)).toBe(false);
      expect(relaySettings(ua)).toBe(DEFAULT_RELAY);
    }
    expect(DEFAULT_RELAY).toEqual({ windowBytes: WINDOW_BYTES, batchBytes: BATCH_BYTES });
    // Node's own navigator, where it has one, is no browser's.
    expect(relaySettings()).toBe(DEFAULT_RELAY);
  });

  it('fits several whole batches in the window, so the sender never waits on a single batch', () => {
    for (const s of [DEFAULT_RELAY, WEBKIT_RELAY]) expect(s.windowBytes / s.batchBytes).toBeGreaterThanOrEqual(4);
  });
});
