/** A few DOM helpers: building elements, finding required ones, and showing errors and notices. */

import { describeError } from './messages.js';

export type Child = Node | string | number | null | undefined | false;
type Props = Record<string, string | number | boolean | undefined | null | ((event: Event) => void)>;

/**
 * `h('button', {type: 'button', onclick: f}, 'Save')`. Attributes are set as attributes (so
 * `aria-*`, `for`, `data-*` work); `on…` functions become listeners; false/null/undefined are skipped.
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === 'function') el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

export function append(parent: Element, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(typeof child === 'number' ? String(child) : child);
  }
}

/** The element with this id; a missing one is a bug in the page, so it throws. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`the page has no #${id}`);
  return el as T;
}

let nextId = 0;
/** A fresh id for label/aria wiring. */
export const uid = (prefix: string): string => `${prefix}-${++nextId}`;

/** Shows an error (with its human text and code) in an alert region; clears it with `undefined`. */
export function showError(region: HTMLElement, error: unknown, context?: string): void {
  region.replaceChildren();
  if (error === undefined) {
    region.hidden = true;
    return;
  }
  const text = describeError(error);
  append(region, [
    h('p', { class: 'error-title' }, context === undefined ? text.title : `${context}: ${text.title}`),
    h('p', {}, text.hint),
    text.code === undefined ? null : h('p', { class: 'error-code' }, `Code: ${text.code}`),
  ]);
  region.dataset['code'] = text.code ?? '';
  region.hidden = false;
  region.focus();
}

/** A polite status line (screen readers announce it without stealing focus). */
export function setStatus(region: HTMLElement, ...content: Child[]): void {
  region.replaceChildren();
  append(region, content);
}
