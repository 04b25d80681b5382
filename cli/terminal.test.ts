import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { qrMatrix } from '../lib/pkg/qr.js';
import { fromQr } from '../devtools/standin/wallet.js';
import { CliError, Exit } from './exit.js';
import { simulatedWallet } from './pkg.js';
import { Progress, emitPointer, formatBytes, parsePointerSink, renderQr } from './terminal.js';

const POINTER = { u: 'http://127.0.0.1:8088/irma/session/AbCdEfGhIjKlMnOpQrSt', irmaqr: 'disclosing' };

/** Reads the module grid back out of the half-block text (quiet zone included). */
function modulesOf(text: string): boolean[][] {
  const rows: boolean[][] = [];
  for (const line of text.replace(/\n$/, '').split('\n')) {
    const top: boolean[] = [];
    const bottom: boolean[] = [];
    for (const ch of line) {
      top.push(ch === '█' || ch === '▀');
      bottom.push(ch === '█' || ch === '▄');
    }
    rows.push(top, bottom);
  }
  return rows;
}

describe('renderQr', () => {
  it('draws exactly the QR modules, two per character cell, inside a quiet zone of two', () => {
    const text = 'https://open.yivi.app/-/session#%7B%22u%22%3A%22x%22%7D';
    const matrix = qrMatrix(text, { errorCorrectionLevel: 'M' });
    const grid = modulesOf(renderQr(text, false));
    const size = matrix.size + 4;
    expect(grid[0]).toHaveLength(size);
    for (let r = 0; r < size; r++) {
      for (let c = 0; c < size; c++) {
        const inside = r >= 2 && c >= 2 && r < matrix.size + 2 && c < matrix.size + 2;
        expect(grid[r]![c], `module ${r},${c}`).toBe(inside && matrix.isDark(r - 2, c - 2));
      }
    }
  });

  it('on a terminal, paints every line black on white so dark themes do not invert it', () => {
    const lines = renderQr('x', true).trimEnd().split('\n');
    for (const line of lines) expect(line).toMatch(/^\x1b\[30;47m[ █▀▄]+\x1b\[0m$/);
  });
});

describe('--qr-json', () => {
  it('takes a descriptor number or a path, never stdin', () => {
    expect(parsePointerSink('3')).toEqual({ fd: 3 });
    expect(parsePointerSink('2')).toEqual({ fd: 2 });
    expect(parsePointerSink('/tmp/x.jsonl')).toEqual({ path: '/tmp/x.jsonl' });
    for (const bad of ['0', '']) {
      const error = (() => {
        try {
          parsePointerSink(bad);
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(CliError);
      expect((error as CliError).exitCode).toBe(Exit.USAGE);
    }
  });

  it('appends one JSON line per session that the wallet reads as a session pointer', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pg-cli-qr-'));
    try {
      const path = join(dir, 'sessions.jsonl');
      emitPointer({ path }, 'sign', POINTER);
      emitPointer({ path }, 'decrypt', POINTER);
      const lines = (await readFile(path, 'utf8')).split('\n');
      expect(lines).toHaveLength(3);
      expect(lines[2]).toBe('');
      const first = JSON.parse(lines[0]!);
      expect(first).toEqual({
        purpose: 'sign',
        sessionPtr: POINTER,
        qr: expect.stringMatching(/^https:\/\/open\.yivi\.app\/-\/session#/),
      });
      expect(JSON.parse(lines[1]!).purpose).toBe('decrypt');
      expect(fromQr(first)).toEqual(POINTER);
      expect(fromQr(first.qr)).toEqual(POINTER);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('an unusable descriptor is a usage error', () => {
    expect(() => emitPointer({ fd: 987 }, 'sign', POINTER)).toThrow(/--qr-json: cannot write to file descriptor 987/);
  });
});

describe('Progress', () => {
  const recorder = (isTTY: boolean) => {
    const written: string[] = [];
    return { out: { isTTY, write: (t: string) => void written.push(t) }, written };
  };

  it('without a terminal: a line per tenth, and a last line at the end', () => {
    let t = 0;
    const { out, written } = recorder(false);
    const progress = new Progress(out, 'Encrypting', 1000, () => t);
    for (let i = 0; i < 100; i++) {
      t += 10;
      progress.add(10);
    }
    progress.finish();
    expect(written).toHaveLength(11);
    expect(written[0]).toBe('Encrypting: 1% 10 B of 1000 B (1000 B/s)\n');
    expect(written[10]).toBe('Encrypting: 100% 1000 B of 1000 B (1000 B/s)\n');
  });

  it('on a terminal: one redrawn line, at most five times a second', () => {
    let t = 0;
    const { out, written } = recorder(true);
    const progress = new Progress(out, 'Decrypting', 2 * 1024 * 1024, () => t);
    for (let i = 0; i < 20; i++) {
      t += 100;
      progress.add(100 * 1024);
    }
    progress.finish();
    expect(written).toHaveLength(11);
    for (const line of written) expect(line).toMatch(/^\rDecrypting: \d+% .*\x1b\[K\n?$/);
    expect(written.at(-1)).toBe('\rDecrypting: 97% 2.0 MiB of 2.0 MiB (1000.0 KiB/s)\x1b[K\n');
  });

  it('formats sizes in binary units', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(512 * 1024 * 1024)).toBe('512.0 MiB');
  });
});

describe('simulatedWallet', () => {
  it("names the stand-in's wallet page for a session server on this machine, and nothing for a real one", () => {
    expect(simulatedWallet('http://127.0.0.1:8088/irma/session/abc')).toBe('http://127.0.0.1:8088/standin/wallet');
    expect(simulatedWallet('http://localhost:9088/irma/session/abc')).toBe('http://localhost:9088/standin/wallet');
    expect(simulatedWallet('http://[::1]:8088/irma/session/abc')).toBe('http://[::1]:8088/standin/wallet');
    expect(simulatedWallet('https://is.yivi.app/irma/session/abc')).toBeUndefined();
    expect(simulatedWallet('http://10.0.0.5:8088/irma/session/abc')).toBeUndefined();
    expect(simulatedWallet('not a url')).toBeUndefined();
  });
});
