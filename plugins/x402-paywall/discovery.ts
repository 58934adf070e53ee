/**
 * x402 discovery (`GET /.well-known/x402.json`, the x402 well-known discovery draft): a manifest
 * projected from the route table. Each paywall instance describes its route with the very offers
 * its live 402 answers carry ({@link describePaywall}); the core collects those descriptions per
 * table and serves {@link buildManifest}'s result, so the manifest cannot drift from the 402s and
 * follows every reload.
 *
 * Shape (draft field names): `{x402Version: 2, lastUpdated, items: [{resource: {url, description?,
 * mimeType}, type: 'http', accepts, input: {method, routeTemplate, pathParams?}, output: {mimeType},
 * requires?}]}`, one item per route and method.
 */
import type { DescribedRoute } from '../../core/proxy/plugin-api.ts'
import type { PaymentRequirementsV2 } from '../x402-facilitator/evm/types.ts'
import type { PaywallConfig } from './config.ts'
import type { NetworkOffer } from './offers.ts'

/** What a paywall instance says of its route: exactly what its 402 answers offer. */
export interface PaywallDescription {
  /** One line for `tollgate routes`. */
  summary: string
  scheme: 'exact' | 'upto'
  /** The v2 requirements of the live `PAYMENT-REQUIRED` (with upto, `amount` is the maximum). */
  accepts: PaymentRequirementsV2[]
  description: string
  mimeType: string
  /** upto: atomic token units per credit charged. */
  pricePerCredit?: string
  /** The configured public origin; absent: the origin the manifest is asked on. */
  resourceBaseUrl?: string
  /** Extension keys a client must support to pay (none yet). */
  requires: string[]
}

export function describePaywall(config: PaywallConfig, offers: readonly NetworkOffer[]): PaywallDescription {
  const accepts = offers.map((offer) => offer.v2)
  const terms = accepts.map((a) => `${a.scheme === 'upto' ? '≤' : ''}${a.amount} of ${a.asset} on ${a.network}`).join(', ')
  return {
    summary: accepts.length ? `x402 ${config.scheme}: ${terms}` : 'x402: no payment network available (answers 503)',
    scheme: config.scheme,
    accepts,
    description: config.description,
    mimeType: config.mimeType,
    ...(config.pricePerCredit !== undefined ? { pricePerCredit: config.pricePerCredit } : {}),
    ...(config.resourceBaseUrl ? { resourceBaseUrl: config.resourceBaseUrl } : {}),
    requires: [],
  }
}

/** JSON Schema of a route template's path params (`:city`, `*rest`), when it has any. */
function pathParams(template: string): Record<string, unknown> | undefined {
  const names = (template.match(/[:*][A-Za-z0-9_]+/g) ?? []).map((p) => p.slice(1))
  if (names.length === 0) return undefined
  return {
    type: 'object',
    properties: Object.fromEntries(names.map((name) => [name, { type: 'string' }])),
    required: names,
  }
}

/**
 * The manifest builder: resolves the origin-independent items once; per request only
 * `resource.url` gets the origin (unless the route configured `resourceBaseUrl`).
 */
export function buildManifest(routes: readonly DescribedRoute[]): (origin: string) => unknown {
  const lastUpdated = Math.floor(Date.now() / 1000)
  const items = routes.flatMap((route) => {
    const paid = route.description as PaywallDescription
    // No network available: the route answers 503, not 402; nothing an agent could pay.
    if (paid.accepts.length === 0) return []
    const params = pathParams(route.path)
    return route.methods.map((method) => ({
      base: paid.resourceBaseUrl,
      item: {
        resource: { url: route.path, ...(paid.description ? { description: paid.description } : {}), mimeType: paid.mimeType },
        type: 'http' as const,
        accepts: paid.accepts,
        input: { method, routeTemplate: route.path, ...(params ? { pathParams: params } : {}) },
        output: { mimeType: paid.mimeType },
        ...(paid.requires.length ? { requires: paid.requires } : {}),
      },
    }))
  })
  return (origin) => ({
    x402Version: 2,
    lastUpdated,
    items: items.map(({ base, item }) => ({ ...item, resource: { ...item.resource, url: `${base ?? origin}${item.input.routeTemplate}` } })),
  })
}
