import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addressKey, clientKey } from './ratelimit-key.js';

describe('clientKey without trust', () => {
  it('keys on the TCP peer and ignores X-Forwarded-For entirely', () => {
    expect(clientKey('192.0.2.7', undefined, false)).toBe('192.0.2.7');
    expect(clientKey('192.0.2.7', '198.51.100.1', false)).toBe('192.0.2.7');
    expect(clientKey('192.0.2.7', '198.51.100.1, 203.0.113.5', false)).toBe('192.0.2.7');
  });

  it('has no key without a usable peer address', () => {
    expect(clientKey(undefined, undefined, false)).toBeUndefined();
    expect(clientKey(undefined, '198.51.100.1', false)).toBeUndefined();
    expect(clientKey('', undefined, false)).toBeUndefined();
    expect(clientKey('not an address', undefined, false)).toBeUndefined();
  });
});

describe('clientKey with a trusted proxy', () => {
  const peer = '10.0.0.2';

  it('keys on the rightmost entry, trimmed', () => {
    expect(clientKey(peer, '198.51.100.1', true)).toBe('198.51.100.1');
    expect(clientKey(peer, '198.51.100.1,203.0.113.5', true)).toBe('203.0.113.5');
    expect(clientKey(peer, ' 198.51.100.1 ,\t203.0.113.5  ', true)).toBe('203.0.113.5');
  });

  it('never looks left of the rightmost entry, whatever a client put there', () => {
    // A client that sends its own X-Forwarded-For gets it prepended to by the proxy.
    const spoofed = ['1.1.1.1', '1.1.1.1, 2.2.2.2', 'garbage, 3.3.3.3', '::1, 4.4.4.4'];
    for (const prefix of spoofed) expect(clientKey(peer, `${prefix}, 198.51.100.77`, true)).toBe('198.51.100.77');
    // ...and when the rightmost entry is unusable it falls back to the peer, not to an entry further left.
    expect(clientKey(peer, '198.51.100.1, ', true)).toBe(peer);
    expect(clientKey(peer, '198.51.100.1, unknown', true)).toBe(peer);
  });

  it('falls back to the peer for a missing, empty or unparsable rightmost entry', () => {
    const garbage = [
      '',
      ' ',
      ',',
      'unknown',
      '198.51.100.1:443', // with a port
      '[2001:db8::1]', // bracketed
      '[2001:db8::1]:443',
      'fe80::1%eth0', // with a zone
      '198.51.100', // incomplete
      '198.51.100.256',
      '0198.51.100.1', // leading zero (octal ambiguity)
      '2001:db8::1::2',
      'for=198.51.100.1', // RFC 7239 syntax is another header
      '198.51.100.1 203.0.113.5',
      'x'.repeat(10_000),
    ];
    for (const xff of garbage) expect(clientKey(peer, xff, true), JSON.stringify(xff)).toBe(peer);
    expect(clientKey(peer, undefined, true)).toBe(peer);
  });

  it('masks a forwarded IPv6 address like a peer one', () => {
    expect(clientKey(peer, '2001:db8:aaaa:bbcc:dddd::1', true)).toBe('2001:db8:aaaa:bb00::/56');
    expect(clientKey(peer, '::ffff:198.51.100.9', true)).toBe('198.51.100.9');
  });
});

describe('addressKey', () => {
  it('keeps IPv4 addresses as they are', () => {
    expect(addressKey('127.0.0.1')).toBe('127.0.0.1');
    expect(addressKey('255.255.255.255')).toBe('255.255.255.255');
  });

  it('turns IPv4-mapped IPv6 into IPv4, in either spelling', () => {
    expect(addressKey('::ffff:127.0.0.1')).toBe('127.0.0.1');
    expect(addressKey('::FFFF:192.0.2.128')).toBe('192.0.2.128');
    expect(addressKey('::ffff:c000:280')).toBe('192.0.2.128');
    expect(addressKey('0:0:0:0:0:ffff:c000:0280')).toBe('192.0.2.128');
    // Not mapped: IPv4-compatible and IPv4-translated forms stay IPv6 (masked).
    expect(addressKey('::192.0.2.128')).toBe('0:0:0:0::/56');
    expect(addressKey('::ffff:0:192.0.2.128')).toBe('0:0:0:0::/56');
  });

  it('masks IPv6 to the first 56 bits, whatever the spelling', () => {
    expect(addressKey('2001:db8:1234:5678:9abc:def0:1234:5678')).toBe('2001:db8:1234:5600::/56');
    expect(addressKey('2001:0DB8:1234:56FF::')).toBe('2001:db8:1234:5600::/56');
    expect(addressKey('2001:db8:1234:56::1')).toBe('2001:db8:1234:0::/56');
    expect(addressKey('::1')).toBe('0:0:0:0::/56');
    expect(addressKey('::')).toBe('0:0:0:0::/56');
    expect(addressKey('fe80::1:2:3:4')).toBe('fe80:0:0:0::/56');
    expect(addressKey('2001:db8::ff:1.2.3.4')).toBe('2001:db8:0:0::/56');
  });

  it('gives two IPv6 addresses the same key exactly when their first 56 bits agree', () => {
    const hextets = fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 });
    const spell = (h: number[]) => h.map((x) => x.toString(16)).join(':');
    const prefix56 = (h: number[]) => [h[0], h[1], h[2], (h[3] ?? 0) >> 8].join(',');
    fc.assert(
      fc.property(hextets, hextets, (a, b) => {
        const mapped = (h: number[]) => h.slice(0, 5).every((x) => x === 0) && h[5] === 0xffff;
        fc.pre(!mapped(a) && !mapped(b));
        return (addressKey(spell(a)) === addressKey(spell(b))) === (prefix56(a) === prefix56(b));
      }),
    );
  });

  it('reads compressed spellings as their full form', () => {
    const hextets = fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 });
    fc.assert(
      fc.property(hextets, (h) => {
        const full = h.map((x) => x.toString(16).padStart(4, '0')).join(':');
        // The WHATWG URL parser writes the canonical compressed form (and validates it).
        const compressed = new URL(`http://[${full}]/`).hostname.slice(1, -1);
        return addressKey(compressed) === addressKey(full);
      }),
    );
  });

  it('refuses anything that is not one bare address', () => {
    for (const bad of ['', 'localhost', '1.2.3.4:80', '[::1]', '::1%lo', '1.2.3.4/32', ' 1.2.3.4', '::g']) {
      expect(addressKey(bad), bad).toBeUndefined();
    }
  });
});
