/**
 * Cross-check of a price table against the route's handler: a price for a method the `jsonrpc`
 * handler does not offer is a typo that would silently bill the default, so `tollgate check`
 * refuses it at the method's line.
 */
import { PluginConfigError } from '../../core/proxy/plugin-api.ts'
import type { MethodPrices } from './pricing.ts'

interface OfferedMethods {
  allow?: string[]
  aliases?: Record<string, string>
  chainInfo?: { method?: string }
}

/** The client-facing methods a jsonrpc handler config offers. */
function offered(config: OfferedMethods): Set<string> {
  const names = new Set([...(config.allow ?? []), ...Object.keys(config.aliases ?? {})])
  if (config.chainInfo) names.add(config.chainInfo.method ?? 'privnet_chainInfo')
  return names
}

/** @throws PluginConfigError naming `jsonrpc.methods.<name>` when the handler does not offer that method. */
export function checkMethodPrices(prices: MethodPrices, handler: { name: string; config: unknown } | undefined): void {
  if (handler?.name !== 'jsonrpc') return
  const names = offered((handler.config ?? {}) as OfferedMethods)
  for (const method of Object.keys(prices.methods)) {
    if (!names.has(method)) {
      throw new PluginConfigError(['jsonrpc', 'methods', method], `jsonrpc.methods prices "${method}", which the route's jsonrpc handler does not offer (offered: ${[...names].join(', ') || 'none'})`)
    }
  }
}
