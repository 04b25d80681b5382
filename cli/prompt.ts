import { createInterface, type Interface } from 'node:readline';
import type { Readable } from 'node:stream';
import { CliError, Exit } from './exit.js';

/**
 * Questions on the terminal (stdin for answers, stderr for questions, so stdout stays clean).
 * Only used when stdin is a TTY; scripts answer with flags instead.
 */
export class Prompter {
  private readonly rl: Interface;
  // The iterator buffers lines that arrive before they are asked for (answers piped in ahead).
  private readonly lines: AsyncIterator<string>;

  private closed = false;

  constructor(
    private readonly input: Readable,
    private readonly output: { write(text: string): void },
    private readonly signal?: AbortSignal,
  ) {
    this.rl = createInterface({ input, terminal: false });
    this.lines = this.rl[Symbol.asyncIterator]();
  }

  private async ask(question: string): Promise<string> {
    if (this.closed) throw new CliError(Exit.INTERNAL, 'the prompter was closed');
    this.output.write(question);
    const { signal } = this;
    signal?.throwIfAborted();
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    try {
      const next = await Promise.race([this.lines.next(), aborted]);
      if (next.done === true) throw new CliError(Exit.USAGE, 'no answer: the input ended');
      return next.value.trim();
    } finally {
      if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
    }
  }

  /** A numbered choice; asks again until the answer is one of the numbers (or an exact label). */
  async choose(
    question: string,
    labels: readonly string[],
    describe: (label: string) => string = (l) => l,
  ): Promise<string> {
    const menu = labels.map((label, i) => `  ${i + 1}) ${describe(label)}`).join('\n');
    for (;;) {
      const answer = await this.ask(`${question}\n${menu}\nNumber [1-${labels.length}]: `);
      const n = Number(answer);
      if (Number.isInteger(n) && n >= 1 && n <= labels.length) return labels[n - 1]!;
      if (labels.includes(answer)) return answer;
    }
  }

  /** A line of text; an empty answer takes `fallback` when there is one, else asks again. */
  async text(
    question: string,
    fallback?: string,
    accept: (value: string) => string | undefined = () => undefined,
  ): Promise<string> {
    for (;;) {
      const answer = await this.ask(fallback === undefined ? `${question}: ` : `${question} [${fallback}]: `);
      const value = answer === '' && fallback !== undefined ? fallback : answer;
      if (value === '') continue;
      const complaint = accept(value);
      if (complaint === undefined) return value;
      this.output.write(`${complaint}\n`);
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.rl.close();
    // A terminal's stdin would otherwise keep the process alive.
    this.input.pause();
  }
}
