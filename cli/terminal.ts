import { openSync, writeSync, closeSync } from 'node:fs';
import { qrLink, type SessionPointer } from 'postguard-ts/pkg';
import { qrMatrix } from 'postguard-ts/pkg';
import { usage } from './exit.js';

/**
 * What pg-cli shows on stderr: the QR for an identity session, the machine-readable session pointer
 * for scripts (--qr-json), and a progress line. Stdout is kept for results.
 */

export interface Output {
  write(text: string): void;
  readonly isTTY: boolean;
}

const QUIET_ZONE = 2;

/**
 * The QR as text: two modules per character cell (upper and lower half blocks), dark on an
 * explicitly white background so it reads the same on dark and light terminals.
 */
export function renderQr(text: string, colour: boolean): string {
  const matrix = qrMatrix(text, { errorCorrectionLevel: 'M' });
  const size = matrix.size + 2 * QUIET_ZONE;
  const dark = (row: number, col: number): boolean => {
    const r = row - QUIET_ZONE;
    const c = col - QUIET_ZONE;
    return r >= 0 && c >= 0 && r < matrix.size && c < matrix.size && matrix.isDark(r, c);
  };
  const lines: string[] = [];
  for (let row = 0; row < size; row += 2) {
    let line = '';
    for (let col = 0; col < size; col++) {
      const top = dark(row, col);
      const bottom = row + 1 < size && dark(row + 1, col);
      line += top && bottom ? '█' : top ? '▀' : bottom ? '▄' : ' ';
    }
    lines.push(colour ? `\x1b[30;47m${line}\x1b[0m` : line);
  }
  return `${lines.join('\n')}\n`;
}

/** Where --qr-json goes: a file descriptor number (2 = stderr, 3 = an inherited pipe, …) or a file path. */
export type PointerSink = { fd: number } | { path: string };

export function parsePointerSink(value: string): PointerSink {
  if (/^\d+$/.test(value)) {
    const fd = Number(value);
    if (fd === 0) throw usage('--qr-json: 0 is stdin; give 1, 2, another open descriptor, or a file path');
    return { fd };
  }
  if (value === '') throw usage('--qr-json: give a file descriptor number or a file path');
  return { path: value };
}

/**
 * One JSON line per identity session: {"purpose", "sessionPtr": {u, irmaqr}, "qr"}. A test or a
 * script reads it and completes the session (the stand-in wallet takes the whole object).
 */
export function emitPointer(sink: PointerSink, purpose: 'sign' | 'decrypt', pointer: SessionPointer): void {
  const line = `${JSON.stringify({ purpose, sessionPtr: { u: pointer.u, irmaqr: pointer.irmaqr }, qr: qrLink(pointer) })}\n`;
  if ('fd' in sink) {
    try {
      writeSync(sink.fd, line);
    } catch (error) {
      throw usage(`--qr-json: cannot write to file descriptor ${sink.fd}: ${(error as Error).message}`);
    }
    return;
  }
  let fd: number;
  try {
    fd = openSync(sink.path, 'a');
  } catch (error) {
    throw usage(`--qr-json: cannot open ${sink.path}: ${(error as Error).message}`);
  }
  try {
    writeSync(fd, line);
  } finally {
    closeSync(fd);
  }
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(n: number): string {
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${Math.round(n)} B` : `${value.toFixed(1)} ${UNITS[unit]}`;
}

/**
 * Progress over a known total. On a TTY one line redrawn at most five times a second; elsewhere
 * (--progress into a log) a line per tenth, so logs stay short.
 */
export class Progress {
  private done = 0;
  private lastDraw = 0;
  private lastTenth = -1;
  private readonly started: number;

  constructor(
    private readonly out: Output,
    private readonly label: string,
    private readonly total: number,
    private readonly now: () => number = Date.now,
  ) {
    this.started = now();
  }

  add(bytes: number): void {
    this.done += bytes;
    if (this.out.isTTY) {
      const t = this.now();
      if (t - this.lastDraw >= 200) {
        this.lastDraw = t;
        this.out.write(`\r${this.line()}\x1b[K`);
      }
    } else {
      const tenth = this.total === 0 ? 10 : Math.floor((this.done / this.total) * 10);
      if (tenth > this.lastTenth) {
        this.lastTenth = tenth;
        this.out.write(`${this.line()}\n`);
      }
    }
  }

  finish(): void {
    if (this.out.isTTY) this.out.write(`\r${this.line()}\x1b[K\n`);
    else if (this.lastTenth < 10) this.out.write(`${this.line()}\n`);
  }

  private line(): string {
    const percent = this.total === 0 ? 100 : Math.min(100, Math.floor((this.done / this.total) * 100));
    const seconds = Math.max(0.001, (this.now() - this.started) / 1000);
    return `${this.label}: ${percent}% ${formatBytes(this.done)} of ${formatBytes(this.total)} (${formatBytes(this.done / seconds)}/s)`;
  }
}
