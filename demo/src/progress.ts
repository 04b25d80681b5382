import { h } from './dom.js';
import { formatBytes } from './files.js';

/**
 * A labelled progress bar with a text beside it ("12.5 MiB of 1.0 GiB, 1%"). Updates are batched
 * to one per animation frame: a byte counter may tick thousands of times a second.
 */
export class ProgressView {
  readonly el: HTMLElement;
  private readonly bar: HTMLProgressElement;
  private readonly text: HTMLElement;
  private pending: { done: number; total: number | undefined } | undefined;
  private frame = 0;

  constructor(label: string) {
    this.bar = h('progress', { max: 1, value: 0, 'aria-label': label });
    this.text = h('span', { class: 'progress-text' });
    this.el = h('div', { class: 'progress' }, h('span', { class: 'progress-label' }, label), this.bar, this.text);
  }

  set(done: number, total?: number): void {
    this.pending = { done, total };
    this.frame ||= requestAnimationFrame(() => this.render());
  }

  private render(): void {
    this.frame = 0;
    if (this.pending === undefined) return;
    const { done, total } = this.pending;
    if (total !== undefined && total > 0) {
      const fraction = Math.min(1, done / total);
      this.bar.max = 1;
      this.bar.value = fraction;
      this.text.textContent = `${formatBytes(done)} of ${formatBytes(total)}, ${Math.floor(fraction * 100)}%`;
    } else {
      this.bar.removeAttribute('value');
      this.text.textContent = formatBytes(done);
    }
  }

  finish(text: string): void {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.pending = undefined;
    this.bar.max = 1;
    this.bar.value = 1;
    this.text.textContent = text;
    this.el.dataset['state'] = 'done';
  }

  fail(text: string): void {
    this.end(text, 'failed');
  }

  /** Stopped by the user: told apart from a failure, in words and in style. */
  cancel(text: string): void {
    this.end(text, 'cancelled');
  }

  private end(text: string, state: 'failed' | 'cancelled'): void {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.pending = undefined;
    this.text.textContent = text;
    this.el.dataset['state'] = state;
  }
}
