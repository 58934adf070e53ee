/**
 * What the paywall asks for: one x402 `exact` requirement per configured network, in both protocol
 * versions (v2 in the `PAYMENT-REQUIRED` header, v1 in the JSON body), and the 402 answer itself.
 */
import type { RequestContext, ResponseState } from '../../core/proxy/plugin-api.ts'
import type { EvmAssetInfo } from '../x402-facilitator/evm/chains.ts'
import type { PaymentRequirementsV1, PaymentRequirementsV2 } from '../x402-facilitator/evm/types.ts'
import type { PaywallConfig, PaywallNetworkConfig } from './config.ts'
import { bazaarExtension } from './bazaar.ts'

/** One network's terms, independent of the request. */
export interface NetworkOffer {
  chainId: number
  /** `eip155:<id>`: the v2 network string. */
  caip2: string
  /** The v1 network string: the short name when the network has one, else the CAIP-2 id. */
  v1Network: string
  asset: EvmAssetInfo
  /** The v2 requirement, exactly as advertised (a v2 payment's `accepted` must equal it). */
  v2: PaymentRequirementsV2
  /** v1 requirement without the per-request `resource`; absent for upto (v1 has no upto). */
  v1?: Omit<PaymentRequirementsV1, 'resource'>
  /** A Solana payment's identity for the redemption records (svm-networks.ts); EVM offers derive theirs in payment-header.ts. */
  paymentKey?: (payload: Record<string, any>) => string | undefined
}

/**
 * Longest request path reflected in the resource URL. The URL goes into `PAYMENT-REQUIRED`
 * (base64, a third larger) and the 402 body; a 14 KB path made a 19 KB response head, which
 * node:http clients refuse (16 KB), so the client could not even read the terms.
 */
export const MAX_REFLECTED_PATH = 1024

/**
 * The paid resource's URL; credential path params (an API key) are shown as `***`, and a path
 * longer than {@link MAX_REFLECTED_PATH} is cut there and marked with `...`.
 */
export function resourceUrl(ctx: RequestContext, baseUrl: string | undefined): string {
  let path = ctx.path
  for (const name of ctx.secretParams) {
    const value = ctx.params[name]
    if (value) path = path.split('/').map((segment) => (segment === value || segment === encodeURIComponent(value) ? '***' : segment)).join('/')
  }
  if (path.length > MAX_REFLECTED_PATH) path = path.slice(0, MAX_REFLECTED_PATH) + '...'
  const host = typeof ctx.headers.host === 'string' && /^[A-Za-z0-9.:[\]-]+$/.test(ctx.headers.host) ? ctx.headers.host : 'localhost'
  return `${baseUrl ?? `http://${host}`}${path}`
}

export interface PaymentRequiredTexts {
  /** `error` of the v2 PaymentRequired (header). */
  v2: string
  /** `error` of the v1 body. */
  v1: string
}

export function encodeHeader(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64')
}

/**
 * The 402 answer: `PAYMENT-REQUIRED` (base64 of the v2 PaymentRequired) and the v1 JSON body
 * `{x402Version: 1, error, accepts}`; `extraHeaders` carries a failed settlement's PAYMENT-RESPONSE.
 *
 * @example
 * ```ts
 * ctx.response = paymentRequired(offers, url, config, { v1: 'X-PAYMENT header is required', v2: 'PAYMENT-SIGNATURE header is required' })
 * ```
 */
export function paymentRequired(
  offers: readonly NetworkOffer[], url: string, config: PaywallConfig, texts: PaymentRequiredTexts,
  more: { payer?: string; extraHeaders?: Record<string, string>; method?: string } = {},
): ResponseState & { headers: Record<string, string>; body: Buffer } {
  const v2 = {
    x402Version: 2,
    error: texts.v2,
    resource: { url, description: config.description, mimeType: config.mimeType },
    accepts: offers.map((offer) => offer.v2),
    ...(more.method ? { extensions: { bazaar: bazaarExtension(more.method, config.mimeType) } } : {}),
  }
  const v1 = {
    x402Version: 1,
    error: texts.v1,
    accepts: offers.flatMap((offer) => (offer.v1 ? [{ ...offer.v1, resource: url }] : [])),
    ...(more.payer ? { payer: more.payer } : {}),
  }
  return {
    status: 402,
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'payment-required': encodeHeader(v2),
      ...more.extraHeaders,
    },
    body: Buffer.from(JSON.stringify(v1)),
  }
}
