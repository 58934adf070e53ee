/**
 * The client's address behind proxies (`server.trustProxy`), taken the way nginx's `real_ip`
 * (with `real_ip_recursive on`) and Express's `trust proxy` take it.
 *
 * `X-Forwarded-For` is a list each proxy appends to: its left part is whatever the client wrote,
 * so only the entries appended by proxies we trust mean anything. Walk from the right: the socket
 * peer first, then each entry right to left; the first address that is not a trusted proxy is the
 * client. When every hop is trusted, the left-most entry is the client. An entry that is not an IP
 * address ends the walk at the last trusted hop: that proxy passed on something nobody can read
 * as a client. Taking the left-most entry instead (what tollgate once did) lets any client choose
 * its address, and so its per-IP rate-limit bucket.
 *
 * Settings:
 * - `false` (default): the socket peer is the client; forwarded headers are ignored.
 * - a list: trusted proxies as addresses or CIDRs, or the names `loopback`, `private`
 *   (10/8, 172.16/12, 192.168/16, fc00::/7) and `linklocal` (169.254/16, fe80::/10);
 * - a number n: the n hops nearest to the gateway are trusted, whatever their address (the peer and
 *   the n-1 right-most entries), so the client is the n-th entry from the right;
 * - `true`: `[loopback, private, linklocal]`. It once meant "trust any peer": a gateway exposed
 *   directly would then believe any client, so it now means a proxy on this host or network.
 *
 * Matching uses node:net's BlockList, built once per configuration.
 */
import { BlockList, isIP } from 'node:net'
import type { IncomingMessage } from 'node:http'

export type TrustProxySetting = boolean | number | string[]

const PRESETS: Record<string, readonly string[]> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  private: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
}
const TRUE_MEANS = ['loopback', 'private', 'linklocal']

export interface ProxyTrust {
  /** Whether the socket peer is a trusted proxy, whose X-Forwarded-* headers are believed. */
  trustsPeer(peer: string | undefined): boolean
  /** The client's address for this request. */
  clientIp(req: IncomingMessage): string
}

/** An address as the walk compares it: IPv4-mapped IPv6 (`::ffff:10.0.0.1`) as IPv4; undefined if not an address. */
function parseAddress(text: string): { address: string; family: 'ipv4' | 'ipv6' } | undefined {
  let address = text.trim()
  if (address.startsWith('[')) address = address.slice(1, address.indexOf(']') === -1 ? undefined : address.indexOf(']'))
  else if (address.indexOf(':') !== -1 && address.indexOf(':') === address.lastIndexOf(':')) address = address.slice(0, address.indexOf(':')) // 1.2.3.4:port
  if (address.startsWith('::ffff:') && isIP(address.slice(7)) === 4) address = address.slice(7)
  const version = isIP(address)
  if (version === 4) return { address, family: 'ipv4' }
  if (version === 6) return { address, family: 'ipv6' }
  return undefined
}

/** Adds one `trustProxy` entry to `list`; the reason when it is not an address, CIDR or preset name. */
export function addTrustedProxy(list: BlockList, entry: string): string | undefined {
  const preset = PRESETS[entry]
  if (preset) {
    for (const cidr of preset) addTrustedProxy(list, cidr)
    return undefined
  }
  const slash = entry.indexOf('/')
  const address = slash === -1 ? entry : entry.slice(0, slash)
  const version = isIP(address)
  if (version === 0) return `"${entry}" is not an IP address, a CIDR or one of ${Object.keys(PRESETS).join(', ')}`
  const family = version === 4 ? 'ipv4' : 'ipv6'
  if (slash === -1) {
    list.addAddress(address, family)
    return undefined
  }
  const bits = entry.slice(slash + 1)
  const max = version === 4 ? 32 : 128
  if (!/^\d{1,3}$/.test(bits) || Number(bits) > max) return `"${entry}" has a prefix length outside 0..${max}`
  list.addSubnet(address, Number(bits), family)
  return undefined
}

const NO_TRUST: ProxyTrust = {
  trustsPeer: () => false,
  clientIp: (req) => req.socket.remoteAddress ?? '',
}

/** The trust a `server.trustProxy` setting describes (it was validated when the config loaded). */
export function proxyTrust(setting: TrustProxySetting): ProxyTrust {
  if (setting === false || setting === 0) return NO_TRUST
  if (typeof setting === 'number') {
    const hops = setting
    return { trustsPeer: () => true, clientIp: (req) => walk(req, (_address, hop) => hop < hops) }
  }
  const list = new BlockList()
  for (const entry of setting === true ? TRUE_MEANS : setting) {
    const problem = addTrustedProxy(list, entry)
    if (problem) throw new Error(`server.trustProxy: ${problem}`)
  }
  const trusted = (address: { address: string; family: 'ipv4' | 'ipv6' }) => list.check(address.address, address.family)
  return {
    trustsPeer: (peer) => {
      const parsed = peer === undefined ? undefined : parseAddress(peer)
      return parsed !== undefined && trusted(parsed)
    },
    clientIp: (req) => walk(req, trusted),
  }
}

/**
 * From the socket peer leftwards through X-Forwarded-For: the first hop `trusted` refuses is the
 * client (hop 0 is the peer, 1 the right-most entry, ...).
 */
function walk(req: IncomingMessage, trusted: (address: { address: string; family: 'ipv4' | 'ipv6' }, hop: number) => boolean): string {
  const peer = req.socket.remoteAddress ?? ''
  const parsedPeer = parseAddress(peer)
  if (parsedPeer === undefined || !trusted(parsedPeer, 0)) return peer
  const header = req.headers['x-forwarded-for']
  if (typeof header !== 'string' || header === '') return peer
  const entries = header.split(',')
  let client = parsedPeer.address
  for (let i = entries.length - 1, hop = 1; i >= 0; i--, hop++) {
    const entry = parseAddress(entries[i]!)
    if (entry === undefined) return client
    client = entry.address
    if (!trusted(entry, hop)) return client
  }
  return client
}
