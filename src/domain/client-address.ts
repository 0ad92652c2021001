// Whose address it is, for the per-address limits: connections (http/connections.ts), places in
// the queue of password checks (services/secrets.ts) and failed logins (login-throttle.ts). An
// IPv4 address is one client; so is an IPv6 /64 (2026-11-29, issue 36): a host is given a whole
// /64 (SLAAC, privacy addresses) and may send from any address in it, so keyed by its full
// address one client would have 2^64 shares. An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`,
// as a dual-stack socket reports IPv4 clients) is its IPv4 address.

/** the key the per-address limits count `address` under: IPv4 as it is, IPv6 by its /64 */
export function addressKey(address: string): string {
  if (!address.includes(':')) return address; // IPv4, or not an address at all: as it is
  const g = ipv6Groups(address);
  if (!g) return address;
  if (g[0] === 0 && g[1] === 0 && g[2] === 0 && g[3] === 0 && g[4] === 0 && g[5] === 0xffff) {
    return [g[6]! >> 8, g[6]! & 255, g[7]! >> 8, g[7]! & 255].join('.');
  }
  return `${g.slice(0, 4).map((n) => n.toString(16)).join(':')}::/64`;
}

const HEXTET = /^[0-9a-f]{1,4}$/;
const DOTTED = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** the groups of `piece` (colon-separated hextets, a dotted quad allowed last when `tail`) */
function groupsOf(piece: string, tail: boolean): number[] | undefined {
  if (piece === '') return [];
  const out: number[] = [];
  const parts = piece.split(':');
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    const quad = tail && i === parts.length - 1 ? DOTTED.exec(p) : null;
    if (quad) {
      const b = quad.slice(1).map(Number);
      if (b.some((x) => x > 255)) return undefined;
      out.push(b[0]! * 256 + b[1]!, b[2]! * 256 + b[3]!);
    } else if (HEXTET.test(p)) out.push(parseInt(p, 16));
    else return undefined;
  }
  return out;
}

/** the eight 16-bit groups of an IPv6 address (a zone, `%eth0`, ignored), or undefined */
function ipv6Groups(text: string): number[] | undefined {
  const zone = text.indexOf('%');
  const halves = (zone >= 0 ? text.slice(0, zone) : text).toLowerCase().split('::');
  if (halves.length > 2) return undefined;
  if (halves.length === 1) {
    const all = groupsOf(halves[0]!, true);
    return all?.length === 8 ? all : undefined;
  }
  const head = groupsOf(halves[0]!, false);
  const tail = groupsOf(halves[1]!, true);
  if (!head || !tail || head.length + tail.length > 7) return undefined;
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}
