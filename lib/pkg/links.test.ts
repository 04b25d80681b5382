import QRCode from 'qrcode';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fromQr } from '../../devtools/standin/wallet.js';
import {
  UNIVERSAL_LINK_PREFIX,
  androidIntentLink,
  deviceKind,
  isSessionPointer,
  qrLink,
  sameDeviceLink,
  universalLink,
} from './links.js';
import { drawQr, qrSvg, qrSvgDataUrl } from './qr.js';

const pointer = { u: 'https://is.example/irma/session/AbCdEfGhIj0123456789', irmaqr: 'disclosing' };

const fragmentJson = (link: string): unknown => JSON.parse(decodeURIComponent(link.slice(link.indexOf('#') + 1)));

describe('session links', () => {
  it('encodes the pointer as the Yivi web widget does', () => {
    expect(qrLink(pointer).startsWith(UNIVERSAL_LINK_PREFIX)).toBe(true);
    expect(fragmentJson(qrLink(pointer))).toEqual({ ...pointer, continueOnSecondDevice: true });
    expect(fragmentJson(universalLink(pointer))).toEqual(pointer);
    const intent = androidIntentLink(pointer, 1234);
    expect(intent).toMatch(
      /^intent:\/\/qr\/json\/%7B.*%7D#Intent;package=org\.irmacard\.cardemu;scheme=irma;l\.timestamp=1234;end$/,
    );
  });

  it('every form reads back to the pointer in the simulated wallet (as in the Yivi app)', () => {
    for (const link of [qrLink(pointer), universalLink(pointer), androidIntentLink(pointer)]) {
      expect(fromQr(link)).toEqual(pointer);
    }
  });

  it('survives any characters in u', () => {
    fc.assert(
      fc.property(fc.string(), (tail) => {
        const p = { u: `https://is.example/irma/session/${tail}`, irmaqr: 'disclosing' };
        expect(fragmentJson(qrLink(p))).toEqual({ ...p, continueOnSecondDevice: true });
      }),
    );
  });

  it('picks the intent link on Android only', () => {
    expect(deviceKind('Mozilla/5.0 (Linux; Android 14; Pixel 8)')).toBe('android');
    expect(deviceKind('Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)')).toBe('ios');
    expect(deviceKind('Mozilla/5.0 (X11; Linux x86_64)')).toBe('desktop');
    expect(sameDeviceLink(pointer, 'Mozilla/5.0 (Linux; Android 14)')).toMatch(/^intent:/);
    expect(sameDeviceLink(pointer, 'Mozilla/5.0 (iPhone)')).toBe(universalLink(pointer));
  });

  it('refuses what is not a pointer', () => {
    expect(isSessionPointer(pointer)).toBe(true);
    for (const bad of [
      null,
      {},
      { u: 'javascript:alert(1)', irmaqr: 'disclosing' },
      { u: 'not a url', irmaqr: 'disclosing' },
      { u: pointer.u },
      { u: pointer.u, irmaqr: 'x y' },
    ]) {
      expect(isSessionPointer(bad)).toBe(false);
    }
    expect(() => qrLink({ u: 'ftp://x', irmaqr: 'disclosing' })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });
});

/** The module matrix read back from our SVG path (runs of dark modules per row). */
function svgMatrix(svg: string, margin: number): boolean[][] {
  const side = Number(/viewBox="0 0 (\d+) \1"/.exec(svg)![1]);
  const size = side - 2 * margin;
  const m = Array.from({ length: size }, () => new Array<boolean>(size).fill(false));
  for (const [, x, y, w] of svg.matchAll(/M(\d+) (\d+)h(\d+)v1h-\3z/g)) {
    for (let i = 0; i < Number(w); i++) m[Number(y) - margin]![Number(x) - margin + i] = true;
  }
  return m;
}

describe('QR rendering', () => {
  const text = qrLink(pointer);
  const reference = QRCode.create(text, { errorCorrectionLevel: 'M' }).modules;
  const expected = Array.from({ length: reference.size }, (_, r) =>
    Array.from({ length: reference.size }, (_, c) => reference.get(r, c) === 1),
  );

  it('the SVG holds exactly the modules qrcode computed, inside the quiet zone', () => {
    expect(svgMatrix(qrSvg(text), 4)).toEqual(expected);
    expect(svgMatrix(qrSvg(text, { margin: 0 }), 0)).toEqual(expected);
    expect(qrSvg(text, { dark: '"><script>' })).not.toContain('<script>');
  });

  it('the data URL decodes to the SVG', () => {
    const url = qrSvgDataUrl(text);
    expect(url.startsWith('data:image/svg+xml;charset=utf-8,')).toBe(true);
    expect(decodeURIComponent(url.slice(url.indexOf(',') + 1))).toBe(qrSvg(text));
  });

  it('draws the same modules on a canvas, scaled', () => {
    const fills: Array<[string, number, number, number, number]> = [];
    const ctx = {
      fillStyle: '',
      fillRect: (x: number, y: number, w: number, h: number) => fills.push([String(ctx.fillStyle), x, y, w, h]),
    };
    const canvas = { width: 0, height: 0, getContext: () => ctx };
    drawQr(canvas, text, { scale: 3, margin: 2 });
    expect(canvas.width).toBe((reference.size + 4) * 3);
    const dark = fills.filter(([style]) => style === '#000');
    expect(dark.length).toBe(expected.flat().filter(Boolean).length);
    for (const [, x, y, w, h] of dark) {
      expect([w, h]).toEqual([3, 3]);
      expect(expected[y / 3 - 2]![x / 3 - 2]).toBe(true);
    }
  });

  it('refuses bad input with a code', () => {
    expect(() => qrSvg('')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => qrSvg(text, { margin: -1 })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => drawQr({ width: 0, height: 0, getContext: () => null }, text)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });
});
