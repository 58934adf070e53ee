/**
 * What the workstation proxy (public-routes.ts) sends upstream and where: request headers without
 * hop-by-hop headers and the gateway's cookies, and the unix sockets of the terminal and the IDE.
 */
import type { IncomingMessage } from 'node:http'
import { dirname, join } from 'node:path'
import { withoutGatewayCookies } from '../proxy/http/gateway-cookies.ts'
import { IDE_SOCKET_NAME } from './ide.ts'

export const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'host'])

/** Request headers for the workstation: hop-by-hop and the gateway's session cookies removed. */
export function upstreamHeaders(req: IncomingMessage): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP.has(name)) continue
    if (name === 'cookie') {
      // Cookies ignore ports: on one host the admin listener's session cookie comes along too.
      const rest = withoutGatewayCookies(String(value))
      if (rest !== undefined) out.cookie = rest
      continue
    }
    out[name] = value
  }
  return out
}

/**
 * The unix socket of a workstation's server (`unix:/path`). Drivers give no other kind of target:
 * a TCP port on loopback would be open to every local process.
 */
export function socketOf(target: string): string {
  if (!target.startsWith('unix:/')) throw new Error(`workstation target ${JSON.stringify(target)} is not a unix socket`)
  return target.slice('unix:'.length)
}

/** The IDE's socket: `ide.sock` next to the terminal server's (both drivers bind that directory). */
export function ideTarget(target: string): string {
  return `unix:${join(dirname(socketOf(target)), IDE_SOCKET_NAME)}`
}
