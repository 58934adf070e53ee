/**
 * `mirror-links`: makes the mirror node's pagination work through the gateway. The node writes
 * relative links under its own base path (`/api/v1/accounts?limit=2&account.id=gt:0.0.1002`);
 * behind a mount such as `/ledger/mainnet/api/v1` a client following them would leave the gateway.
 * This plugin moves `links.next` in JSON bodies and every target of the `Link` header under the
 * mount, and fixes nothing else (the core recomputes content-length from the new body).
 *
 * It asks the core for the upstream body (`responseBody`), and asks the upstream for an
 * uncompressed one (`accept-encoding: identity`), since it edits the text.
 *
 * ```yaml
 * plugins:
 *   - { name: mirror-links }   # prefixes derived from the route and its upstream
 * ```
 */
import type { PluginDefinition, PluginInit, RequestContext } from '../../core/proxy/plugin-api.ts'
import { rewriteBodyNext, rewriteLinkHeader, type LinkMapping } from './rewrite.ts'

export interface MirrorLinksConfig {
  upstreamPrefix?: string
  mount?: string
}

/** The gateway prefix a route serves the upstream's paths under: its path minus its rewrite. */
function derivedMount(init: PluginInit): string {
  const { path, rewrite } = init.route
  const tail = rewrite === undefined || rewrite === '/' ? '' : rewrite
  if (!path.endsWith(tail)) {
    throw new Error(`cannot derive the mount: path ${path} does not end with its rewrite ${rewrite}; set mount`)
  }
  const mount = path.slice(0, path.length - tail.length)
  if (/[:*]/.test(mount)) throw new Error(`cannot derive the mount: ${mount} has path parameters; set mount`)
  return mount.replace(/\/+$/, '')
}

function derivedUpstreamPrefix(init: PluginInit): string {
  if (!init.route.upstream) throw new Error('mirror-links needs a route with an upstream, or upstreamPrefix set')
  return init.upstream(init.route.upstream).basePath
}

function isJson(contentType: string | string[] | undefined): boolean {
  const value = Array.isArray(contentType) ? contentType[0] : contentType
  return value !== undefined && /\bjson\b/i.test(value)
}

const mirrorLinks: PluginDefinition<MirrorLinksConfig> = {
  name: 'mirror-links',
  version: '1.0.0',
  priority: 700,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      upstreamPrefix: {
        type: 'string',
        pattern: '^(/[^/?#]+)*$',
        description: "Path prefix the upstream's links start with (e.g. /api/v1). Default: the path of the route's upstream URL.",
      },
      mount: {
        type: 'string',
        pattern: '^(/[^/?#:*]+)*$',
        description: 'Gateway prefix the links are moved under (e.g. /ledger/mainnet/api/v1). Default: the route path minus its rewrite.',
      },
    },
  },
  needs: () => ({ responseBody: true }),
  create(config, init) {
    const mapping: LinkMapping = {
      from: config.upstreamPrefix ?? derivedUpstreamPrefix(init),
      to: config.mount ?? derivedMount(init),
    }
    return {
      request(ctx: RequestContext) {
        ctx.upstreamHeaders['accept-encoding'] = 'identity'
      },
      response(ctx: RequestContext) {
        const response = ctx.response
        // Only answers the upstream just gave: a cached answer was rewritten before it was stored.
        if (!response || ctx.upstreamStatus === undefined || ctx.error || response.status < 200 || response.status >= 300) return
        const link = response.headers.link
        if (link !== undefined) {
          response.headers.link = Array.isArray(link) ? link.map((v) => rewriteLinkHeader(v, mapping)) : rewriteLinkHeader(link, mapping)
        }
        if (response.body && isJson(response.headers['content-type'])) {
          const encoding = response.headers['content-encoding']
          if (encoding !== undefined && encoding !== 'identity') return
          const rewritten = rewriteBodyNext(response.body, mapping)
          if (rewritten) response.body = rewritten
        }
      },
    }
  },
}

export default mirrorLinks
