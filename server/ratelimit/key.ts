import { BlockList, isIP, isIPv4, isIPv6 } from 'node:net';

/**
 * Which client a request counts against (for the rate limiter and the status-event stream caps).
 *
 * By default the TCP peer address. Behind reverse proxies, X-Forwarded-For is read only as far as the
 * proxies we trust wrote it:
 *
 * - `TrustedProxies` (--trusted-proxies): starting from the TCP peer, while the address at hand is a
 *   trusted proxy, step one X-Forwarded-For entry to the left (each proxy appends the address it got the
 *   request from). The first address that is not a trusted proxy is the client. A peer that is not a
 *   trusted proxy is the client, whatever it wrote in the header; an entry that does not parse stops the
 *   walk at the proxy that wrote it (so garbage never picks someone else's bucket).
 * - `true` (the deprecated --ratelimit-trust-forwarded-for, pg-pkg's rule): whoever the peer is, the
 *   rightmost entry; never anything left of it. A missing or unparsable entry falls back to the peer.
 *
 * Entries may carry a port, as some proxies write them (`192.0.2.1:5123`, `[2001:db8::1]:443`,
 * `[2001:db8::1]`): the address is what counts, so two clients behind one proxy keep two buckets.
 *
 * IPv4 addresses (including IPv4-mapped IPv6 such as `::ffff:192.0.2.1`) key as themselves. IPv6 keys on
 * the first 56 bits, as `2001:db8:0:ab00::/56`: one subscriber usually holds a whole /56 (or /48), so
 * single addresses would let one client spread over 2^72 buckets.
 *
 * Returns undefined only when there is no usable peer address at all.
 */

/** The proxies whose X-Forwarded-For entries are believed: addresses and CIDR ranges, IPv4 and IPv6. */
export interface TrustedProxies {
  /** The ranges as configured, for the start-up log. */
  readonly ranges: readonly string[];
  has(ip: string): boolean;
}

/** Most X-Forwarded-For entries walked through: a longer chain of trusted proxies is a misconfiguration. */
const MAX_HOPS = 16;

/**
 * Parses `--trusted-proxies` entries (`10.0.0.0/8`, `127.0.0.1`, `fd00::/8`, `::1`). Throws a RangeError
 * naming the first entry that is not an address or a CIDR range.
 */
export function trustedProxies(entries: readonly string[]): TrustedProxies {
  const list = new BlockList();
  const ranges: string[] = [];
  for (const raw of entries) {
    const entry = raw.trim();
    const slash = entry.indexOf('/');
    const address = slash === -1 ? entry : entry.slice(0, slash);
    const family = isIP(address);
    if (family === 0 || address.includes('%'))
      throw new RangeError(`not an IP address or CIDR range: ${JSON.stringify(raw)}`);
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (slash === -1) {
      list.addAddress(address, type);
    } else {
      const bits = entry.slice(slash + 1);
      const max = family === 4 ? 32 : 128;
      if (!/^\d{1,3}$/.test(bits) || Number(bits) > max)
        throw new RangeError(`bad prefix length in ${JSON.stringify(raw)}`);
      list.addSubnet(address, Number(bits), type);
    }
    ranges.push(entry);
  }
  return {
    ranges,
    has(ip) {
      const family = isIP(ip);
      return family !== 0 && list.check(ip, family === 4 ? 'ipv4' : 'ipv6');
    },
  };
}

/**
 * The bare address of one X-Forwarded-For entry: `a.b.c.d`, `a.b.c.d:port`, an IPv6 address, or one in
 * brackets with or without a port. Undefined for anything else (`unknown`, zones, obfuscated names).
 */
export function forwardedAddress(entry: string): string | undefined {
  const text = entry.trim();
  if (isIPv4(text)) return text;
  if (isIPv6(text)) return text.includes('%') ? undefined : text;
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})$/.exec(text);
  if (v4 !== null) return isIPv4(v4[1]!) && validPort(v4[2]!) ? v4[1] : undefined;
  const v6 = /^\[([0-9A-F:.]+)\](?::(\d{1,5}))?$/i.exec(text);
  if (v6 !== null && isIPv6(v6[1]!) && (v6[2] === undefined || validPort(v6[2]))) return v6[1];
  return undefined;
}

const validPort = (digits: string): boolean => Number(digits) <= 65_535;

/** Node reports link-local peers with a zone (`fe80::1%eth0`); the zone is not part of the address. */
const withoutZone = (ip: string): string => {
  const zone = ip.indexOf('%');
  return zone < 0 ? ip : ip.slice(0, zone);
};

export function clientKey(
  peerIp: string | undefined,
  xForwardedFor: string | undefined,
  trust: boolean | TrustedProxies,
): string | undefined {
  const address = clientAddress(peerIp, xForwardedFor, trust);
  return address === undefined ? undefined : addressKey(address);
}

/**
 * The client's bare address, found as clientKey finds it (the peer, or the X-Forwarded-For entry left
 * of the trusted proxies), before it is keyed: an IPv6 address whole, not its /56. For the audit trail.
 */
export function clientAddress(
  peerIp: string | undefined,
  xForwardedFor: string | undefined,
  trust: boolean | TrustedProxies,
): string | undefined {
  const peer = peerIp === undefined ? undefined : withoutZone(peerIp);
  if (trust === false || xForwardedFor === undefined) return peer;
  if (trust === true) {
    const rightmost = forwardedAddress(xForwardedFor.slice(xForwardedFor.lastIndexOf(',') + 1));
    if (rightmost !== undefined && addressKey(rightmost) !== undefined) return rightmost;
    return peer;
  }
  if (peer === undefined) return undefined;
  let client = peer;
  let end = xForwardedFor.length;
  for (let hop = 0; hop < MAX_HOPS && end >= 0 && trust.has(client); hop++) {
    const comma = xForwardedFor.lastIndexOf(',', end - 1);
    const next = forwardedAddress(xForwardedFor.slice(comma + 1, end));
    if (next === undefined) break;
    client = next;
    end = comma;
  }
  return client;
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
    const [a = 0, b = 0, c = 0, d = 0] = text
      .slice(lastColon + 1)
      .split('.')
      .map(Number);
    text = `${text.slice(0, lastColon + 1)}${hex((a << 8) | b)}:${hex((c << 8) | d)}`;
  }
  const groups = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const gap = text.indexOf('::');
  if (gap === -1) return groups(text);
  const head = groups(text.slice(0, gap));
  const rest = groups(text.slice(gap + 2));
  return [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest];
}
