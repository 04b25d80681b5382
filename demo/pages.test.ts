import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * One navigation on every page of the demo: the same links in the same order (Encrypt, Decrypt,
 * Send, Receive, then the wallet simulator), the page itself marked as current, so a person who
 * lands on any page (a mailed receive link, the landing page) can reach all the others.
 */

const PAGES: Readonly<Record<string, string>> = {
  'index.html': './',
  'decrypt.html': './decrypt.html',
  'send.html': './send.html',
  'receive.html': './receive.html',
};
const NAV = [
  ['./', 'Encrypt'],
  ['./decrypt.html', 'Decrypt'],
  ['./send.html', 'Send'],
  ['./receive.html', 'Receive'],
  ['#', 'Wallet simulator'],
];

/** The page's <nav aria-label="Pages"> links: href, text, and whether it is marked current. */
function navOf(html: string): Array<{ href: string; text: string; current: boolean }> {
  const navs = [...html.matchAll(/<nav aria-label="Pages">(.*?)<\/nav>/gs)];
  expect(navs).toHaveLength(1);
  return [...navs[0]![1]!.matchAll(/<a ([^>]*)>([^<]*)<\/a>/g)].map(([, attributes, text]) => ({
    href: /href="([^"]*)"/.exec(attributes!)?.[1] ?? '',
    text: text!,
    current: attributes!.includes('aria-current="page"'),
  }));
}

describe('the demo pages', () => {
  it.each(Object.entries(PAGES))('%s has the one navigation, itself marked current', (file, self) => {
    const nav = navOf(readFileSync(join(import.meta.dirname, file), 'utf8'));
    expect(nav.map((l) => [l.href, l.text])).toEqual(NAV);
    expect(nav.filter((l) => l.current).map((l) => l.href)).toEqual([self]);
  });
});
