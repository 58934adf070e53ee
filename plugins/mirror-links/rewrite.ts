/**
 * Rewrites the mirror node's pagination links from its own base path to the gateway's mount:
 * `links.next` in a JSON body and the `Link` header. The body is edited as text, never parsed and
 * re-serialised: mirror records hold integers above 2^53 (balances in tinybars) that a
 * JSON.parse round trip would corrupt.
 */

/** A prefix mapping: links starting with `from` (then `/`, `?` or the end) start with `to` instead. */
export interface LinkMapping {
  from: string
  to: string
}

/**
 * The link moved under the gateway's mount, or `undefined` when it is not under `from`. An absolute
 * link (node configured with includeHostInLink) becomes a relative one on the gateway.
 * @example mapLink('/api/v1/accounts?limit=2', { from: '/api/v1', to: '/ledger/mainnet/api/v1' })
 * // '/ledger/mainnet/api/v1/accounts?limit=2'
 */
export function mapLink(link: string, mapping: LinkMapping): string | undefined {
  let path = link
  if (!link.startsWith('/')) {
    if (!/^https?:\/\//i.test(link)) return undefined
    try {
      const url = new URL(link)
      path = url.pathname + url.search
    } catch {
      return undefined
    }
  }
  const { from, to } = mapping
  if (!path.startsWith(from)) return undefined
  const next = path.charCodeAt(from.length)
  // '/' or '?' or the end: `/api/v1x` is not under `/api/v1`.
  if (from !== '' && !(Number.isNaN(next) || next === 47 || next === 63)) return undefined
  return to + path.slice(from.length)
}

// `"links":{"next":"..."}` as the node writes it (res.json: compact); `links` is its last top-level key.
const LINKS_NEXT = /^"links"\s*:\s*\{\s*"next"\s*:\s*("(?:[^"\\]|\\.)*")/

/**
 * The JSON body with its top-level `links.next` moved under the mount, or `undefined` when there
 * is nothing to change (no links, `next: null`, or a link outside `from`).
 * @example rewriteBodyNext(Buffer.from('{"accounts":[],"links":{"next":"/api/v1/accounts?limit=1"}}'), mapping)
 */
export function rewriteBodyNext(body: Buffer, mapping: LinkMapping): Buffer | undefined {
  const text = body.toString('utf8')
  const at = text.lastIndexOf('"links"')
  if (at === -1) return undefined
  const match = LINKS_NEXT.exec(text.slice(at))
  if (!match) return undefined
  let link: unknown
  try {
    link = JSON.parse(match[1])
  } catch {
    return undefined
  }
  const mapped = typeof link === 'string' ? mapLink(link, mapping) : undefined
  if (mapped === undefined) return undefined
  const start = at + match[0].length - match[1].length
  return Buffer.from(text.slice(0, start) + JSON.stringify(mapped) + text.slice(start + match[1].length), 'utf8')
}

/**
 * A `Link` header value with every target under `from` moved under the mount (RFC 8288:
 * `<target>; rel="next", <target>; rel="prev"`); other targets are kept as they are.
 * @example rewriteLinkHeader('</api/v1/accounts?limit=2>; rel="next"', mapping)
 * // '</ledger/mainnet/api/v1/accounts?limit=2>; rel="next"'
 */
export function rewriteLinkHeader(value: string, mapping: LinkMapping): string {
  return value.replace(/<([^>]*)>/g, (whole, target: string) => {
    const mapped = mapLink(target, mapping)
    return mapped === undefined ? whole : `<${mapped}>`
  })
}
