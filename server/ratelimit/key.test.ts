import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addressKey, clientKey, forwardedAddress, trustedProxies } from './key.js';

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
      '198.51.100.1:65536', // not a port
      '198.51.100.1:', // no port
      '[2001:db8::1]:', // no port
      '[198.51.100.1]', // IPv4 in brackets
      '[fe80::1%eth0]', // with a zone
      '2001:db8::1:443]',
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

  it('reads entries with a port as their address: two clients behind one proxy keep two buckets', () => {
    expect(clientKey(peer, '198.51.100.1:443', true)).toBe('198.51.100.1');
    expect(clientKey(peer, '198.51.100.2:443', true)).toBe('198.51.100.2');
    expect(clientKey(peer, '[2001:db8:aaaa:bbcc::1]:443', true)).toBe('2001:db8:aaaa:bb00::/56');
    expect(clientKey(peer, '[2001:db8:1111:2222::1]', true)).toBe('2001:db8:1111:2200::/56');
    expect(clientKey(peer, '[::ffff:198.51.100.3]:8080', true)).toBe('198.51.100.3');
  });
});

describe('forwardedAddress', () => {
  it('strips ports and brackets and nothing else', () => {
    expect(forwardedAddress(' 192.0.2.1 ')).toBe('192.0.2.1');
    expect(forwardedAddress('192.0.2.1:0')).toBe('192.0.2.1');
    expect(forwardedAddress('192.0.2.1:65535')).toBe('192.0.2.1');
    expect(forwardedAddress('2001:db8::1')).toBe('2001:db8::1');
    expect(forwardedAddress('[2001:db8::1]:65535')).toBe('2001:db8::1');
    for (const bad of [
      '192.0.2.1:65536',
      '192.0.2.1:-1',
      '192.0.2.1:1:2',
      '[2001:db8::1',
      '2001:db8::1]',
      '[]',
      '[::1]:x',
      'a:1',
      '::1%lo',
    ]) {
      expect(forwardedAddress(bad), bad).toBeUndefined();
    }
  });
});

describe('clientKey with --trusted-proxies', () => {
  const proxies = trustedProxies(['10.0.0.0/8', '127.0.0.1', 'fd00::/8']);

  it('ignores X-Forwarded-For from a peer that is not a trusted proxy', () => {
    expect(clientKey('192.0.2.7', '198.51.100.1', proxies)).toBe('192.0.2.7');
    expect(clientKey('11.0.0.1', '198.51.100.1', proxies)).toBe('11.0.0.1');
    expect(clientKey('127.0.0.2', '198.51.100.1', proxies)).toBe('127.0.0.2');
    expect(clientKey('2001:db8::5', '198.51.100.1', proxies)).toBe('2001:db8:0:0::/56');
  });

  it('believes a trusted peer: the client is the entry it appended', () => {
    expect(clientKey('10.1.2.3', '198.51.100.1', proxies)).toBe('198.51.100.1');
    expect(clientKey('127.0.0.1', '198.51.100.1:5000', proxies)).toBe('198.51.100.1');
    expect(clientKey('::ffff:127.0.0.1', '198.51.100.1', proxies)).toBe('198.51.100.1');
    expect(clientKey('fd12::1', '[2001:db8:1:2ff::3]:443', proxies)).toBe('2001:db8:1:200::/56');
    // Without the header a trusted proxy is its own client (health checks and the like).
    expect(clientKey('10.1.2.3', undefined, proxies)).toBe('10.1.2.3');
  });

  it('walks left through trusted proxies and stops at the first address that is not one', () => {
    // client → 10.9.9.9 (edge proxy) → 10.1.2.3 (peer)
    expect(clientKey('10.1.2.3', '198.51.100.1, 10.9.9.9', proxies)).toBe('198.51.100.1');
    // A client's own spoofed entries sit left of its real address, and are never reached.
    expect(clientKey('10.1.2.3', '1.1.1.1, 10.0.0.1, 198.51.100.1, 10.9.9.9', proxies)).toBe('198.51.100.1');
    // A spoofed trusted address on the far left just makes the walk end there, at a trusted address.
    expect(clientKey('10.1.2.3', '10.0.0.1', proxies)).toBe('10.0.0.1');
  });

  it('stops at the proxy that wrote an entry it cannot read', () => {
    expect(clientKey('10.1.2.3', '198.51.100.1, unknown', proxies)).toBe('10.1.2.3');
    expect(clientKey('10.1.2.3', '198.51.100.1, unknown, 10.9.9.9', proxies)).toBe('10.9.9.9');
    expect(clientKey('10.1.2.3', '', proxies)).toBe('10.1.2.3');
    expect(clientKey('10.1.2.3', ',', proxies)).toBe('10.1.2.3');
  });

  it('walks at most 16 hops', () => {
    const chain = Array.from({ length: 20 }, (_, i) => `10.0.0.${i + 1}`).join(', ');
    expect(clientKey('10.1.2.3', `198.51.100.1, ${chain}`, proxies)).toBe('10.0.0.5');
  });

  it('takes addresses and CIDR ranges, and refuses anything else', () => {
    expect(trustedProxies([' 192.0.2.0/24 ', '::1', '0.0.0.0/0']).ranges).toEqual(['192.0.2.0/24', '::1', '0.0.0.0/0']);
    for (const bad of [
      '',
      'proxy.example',
      '10.0.0.0/33',
      'fd00::/129',
      '10.0.0.0/',
      '10.0.0.0/x',
      'fe80::1%eth0',
      '10.0.0.0/8/8',
    ]) {
      expect(() => trustedProxies([bad]), bad).toThrow(RangeError);
    }
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
