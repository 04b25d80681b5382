import { describe, expect, it } from 'vitest';
import { parseReceiveLink, receiveLink } from './links.js';

const ID = '0b6e2f3c-1d2a-4e5f-8a9b-0c1d2e3f4a5b';

describe('parseReceiveLink', () => {
  it('reads the receive page link, Cryptify mail link and a bare id alike', () => {
    expect(parseReceiveLink(`https://demo.test/receive.html?uuid=${ID}&recipient=bob%40example.com`)).toEqual({
      uuid: ID,
      recipient: 'bob@example.com',
    });
    expect(
      parseReceiveLink(`https://postguard.eu/download?uuid=${ID.toUpperCase()}&recipient=bob@example.com`),
    ).toEqual({ uuid: ID, recipient: 'bob@example.com' });
    expect(parseReceiveLink(`  ${ID}\n`)).toEqual({ uuid: ID, recipient: undefined });
    expect(parseReceiveLink(`?uuid=${ID}`, 'http://127.0.0.1:5173/receive.html')).toEqual({
      uuid: ID,
      recipient: undefined,
    });
  });

  it('takes nothing from a link without a well-formed upload id, and drops a recipient that is no address', () => {
    expect(parseReceiveLink('https://demo.test/receive.html')).toBeUndefined();
    expect(parseReceiveLink(`https://demo.test/receive.html?uuid=${ID}/../x`)).toBeUndefined();
    expect(parseReceiveLink('not a link at all')).toBeUndefined();
    expect(parseReceiveLink(`?uuid=${ID}&recipient=<script>`)?.recipient).toBeUndefined();
  });

  it('builds a link the parser reads back', () => {
    const link = receiveLink('http://127.0.0.1:5173/send.html?x=1', ID, 'a+b@example.com');
    expect(link).toBe(`http://127.0.0.1:5173/receive.html?uuid=${ID}&recipient=a%2Bb%40example.com`);
    expect(parseReceiveLink(link)).toEqual({ uuid: ID, recipient: 'a+b@example.com' });
  });
});
