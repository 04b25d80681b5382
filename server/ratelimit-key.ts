import { isIPv4, isIPv6 } from 'node:net';

/**
 * Which client a request counts against.
 *
 * By default the TCP peer address. Behind a trusted reverse proxy (`trust`), the rightmost
 * X-Forwarded-For entry: that one was written by our proxy, everything left of it by whoever sent the
 * request, so it is never consulted. A missing or unparsable rightmost entry falls back to the peer.
 *
 * IPv4 addresses (including IPv4-mapped IPv6 such as `::ffff:192.0.2.1`) key as themselves. IPv6 keys on
 * the first 56 bits, as `2001:db8:0:ab00::/56`: one subscriber usually holds a whole /56 (or /48), so
 * single addresses would let one client spread over 2^72 buckets.
 *
 * Returns undefined only when there is no usable peer address at all.
 */
export function clientKey(
  peerIp: string | undefined,
  xForwardedFor: string | undefined,
  trust: boolean,
): string | undefined {
  if (trust && xForwardedFor !== undefined) {
    const rightmost = xForwardedFor.slice(xForwardedFor.lastIndexOf(',') + 1).trim();
    const forwarded = addressKey(rightmost);
    if (forwarded !== undefined) return forwarded;
  }
  // Node reports link-local peers with a zone (`fe80::1%eth0`); the zone is not part of the address.
  const peer = peerIp?.replace(/%.*$/s, '');
  return peer === undefined ? undefined : addressKey(peer);
}

/** The key for one bare IP address (no port, brackets or zone), or undefined if it is not one. */
export function addressKey(ip: string): string | undefined {
  if (isIPv4(ip)) return ip;
  if (!isIPv6(ip) || ip.includes('%')) return undefined;
  const h = ipv6Hextets(ip);
  if (h[0] === 0 && h[1] === 0 && h[2] === 0 && h[3] === 0 && h[4] === 0 && h[5] === 0xffff) {
    const [hi, lo] = [h[6] ?? 0, h[7] ?? 0];
    return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  }
  const h3 = (h[3] ?? 0) & 0xff00;
  return `${hex(h[0])}:${hex(h[1])}:${hex(h[2])}:${h3.toString(16)}::/56`;
}

const hex = (n: number | undefined) => (n ?? 0).toString(16);

/** The eight 16-bit groups of an address that `isIPv6` accepted (so no validation is repeated here). */
function ipv6Hextets(ip: string): number[] {
  let text = ip;
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    // An embedded dotted quad (::ffff:192.0.2.1) is the last two groups written in decimal.
    const [a = 0, b = 0, c = 0, d = 0] = text.slice(lastColon + 1).split('.').map(Number);
    text = `${text.slice(0, lastColon + 1)}${hex((a << 8) | b)}:${hex((c << 8) | d)}`;
  }
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const gap = text.indexOf('::');
  if (gap === -1) return groups(text);
  const head = groups(text.slice(0, gap));
  const rest = groups(text.slice(gap + 2));
  return [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest];
}
