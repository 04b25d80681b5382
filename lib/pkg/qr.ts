import QRCode from 'qrcode';
import { invalidArgument } from './errors.js';

/**
 * QR codes for session links. `qrcode` encodes; the drawing is ours, from the module matrix, so
 * the SVG path works anywhere (Node, workers) and the canvas path takes an HTMLCanvasElement or an
 * OffscreenCanvas alike.
 */

/** How a QR code is encoded and coloured (`qrSvg`, `qrSvgDataUrl`, `drawQr`, `qrMatrix`). */
export interface QrOptions {
  /** Error correction; 'M' (15 %) by default, as the Yivi widget's QR. */
  errorCorrectionLevel?: 'L' | 'M' | 'Q' | 'H';
  /** Quiet zone in modules; 4 by default (what scanners expect). */
  margin?: number;
  /** CSS colour of the dark modules; '#000' by default. */
  dark?: string;
  /** CSS colour of the light modules and the margin; '#fff' by default. */
  light?: string;
}

/** A QR code's modules, for drawing it some other way. */
export interface QrMatrix {
  /** Modules per side, without the margin. */
  size: number;
  /** Whether the module at `row`, `col` (from 0, top left) is dark. */
  isDark(row: number, col: number): boolean;
}

/** The QR code for `text` as a matrix of modules, for a renderer of your own; `qrSvg` and `drawQr` draw it for you. */
export function qrMatrix(text: string, options: QrOptions = {}): QrMatrix {
  if (typeof text !== 'string' || text.length === 0) throw invalidArgument('QR text must be a non-empty string');
  const { modules } = QRCode.create(text, { errorCorrectionLevel: options.errorCorrectionLevel ?? 'M' });
  return { size: modules.size, isDark: (row, col) => modules.get(row, col) === 1 };
}

function checkedMargin(margin: number | undefined): number {
  const m = margin ?? 4;
  if (!Number.isInteger(m) || m < 0 || m > 64) throw invalidArgument('QR margin must be an integer from 0 to 64');
  return m;
}

const escapeAttribute = (value: string): string => value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** A standalone SVG document; it scales to its container (set width/height in CSS). */
export function qrSvg(text: string, options: QrOptions = {}): string {
  const matrix = qrMatrix(text, options);
  const margin = checkedMargin(options.margin);
  const side = matrix.size + 2 * margin;
  let path = '';
  for (let row = 0; row < matrix.size; row++) {
    let col = 0;
    while (col < matrix.size) {
      if (!matrix.isDark(row, col)) {
        col++;
        continue;
      }
      const start = col;
      while (col < matrix.size && matrix.isDark(row, col)) col++;
      path += `M${start + margin} ${row + margin}h${col - start}v1h-${col - start}z`;
    }
  }
  const dark = escapeAttribute(options.dark ?? '#000');
  const light = escapeAttribute(options.light ?? '#fff');
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${side} ${side}" shape-rendering="crispEdges">` +
    `<rect width="${side}" height="${side}" fill="${light}"/><path fill="${dark}" d="${path}"/></svg>`
  );
}

/** The SVG as a data: URL, for an <img src>. */
export const qrSvgDataUrl = (text: string, options: QrOptions = {}): string =>
  `data:image/svg+xml;charset=utf-8,${encodeURIComponent(qrSvg(text, options))}`;

/** What drawQr needs of a canvas: an HTMLCanvasElement or an OffscreenCanvas. */
export interface CanvasLike {
  /** Set by drawQr to the QR's size in pixels. */
  width: number;
  /** Set by drawQr to the QR's size in pixels. */
  height: number;
  /** The canvas's 2D context, which drawQr draws with. */
  getContext(kind: '2d'): unknown;
}

interface Context2d {
  fillStyle: unknown;
  fillRect(x: number, y: number, w: number, h: number): void;
}

/** Draws the QR onto `canvas`, resizing it to `scale` pixels per module (4 by default). */
export function drawQr(canvas: CanvasLike, text: string, options: QrOptions & { scale?: number } = {}): void {
  const matrix = qrMatrix(text, options);
  const margin = checkedMargin(options.margin);
  const scale = options.scale ?? 4;
  if (!Number.isInteger(scale) || scale < 1 || scale > 64)
    throw invalidArgument('QR scale must be an integer from 1 to 64');
  const side = (matrix.size + 2 * margin) * scale;
  canvas.width = side;
  canvas.height = side;
  const ctx = canvas.getContext('2d') as Context2d | null;
  if (ctx === null) throw invalidArgument('the canvas has no 2d context');
  ctx.fillStyle = options.light ?? '#fff';
  ctx.fillRect(0, 0, side, side);
  ctx.fillStyle = options.dark ?? '#000';
  for (let row = 0; row < matrix.size; row++) {
    for (let col = 0; col < matrix.size; col++) {
      if (matrix.isDark(row, col)) ctx.fillRect((col + margin) * scale, (row + margin) * scale, scale, scale);
    }
  }
}
