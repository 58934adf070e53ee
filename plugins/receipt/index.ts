/**
 * `receipt`: paid answers carry a receipt signed by the gateway (x402 offer-and-receipt extension,
 * JWS format, Ed25519): what was paid for (`resourceUrl`), how much (`amount` in `asset`), by whom
 * (`payer`: the wallet, or `project:<id>` for credits), when (`issuedAt`) and the request id.
 *
 * - response (priority 800: after the credit meter and the x402 paywall settled): a 2xx/3xx that
 *   was paid (an x402 settlement, or credits charged > 0) gets `x-receipt: <compact JWS>`; an
 *   x402 v2 answer also gets it inside `PAYMENT-RESPONSE` at
 *   `extensions["offer-receipt"].info.receipt` = `{format: "jws", signature}`, where the
 *   extension puts it. An answer that cost nothing, or failed, gets none.
 * - `GET /.well-known/tollgate-receipt-keys.json`: the public keys (JWKS) of every route's signer,
 *   for `tollgate receipt verify --keys` offline.
 *
 * The private key comes from an environment variable (never from the file, never logged).
 */
import { chargedCredits } from '../credit-meter/index.ts'
import { settledPayment } from '../x402-paywall/index.ts'
import { resourceUrl } from '../x402-paywall/offers.ts'
import type { DescribedRoute, PluginDefinition, RequestContext } from '../../core/proxy/plugin-api.ts'
import { signingKeyFrom, signReceipt, type PublicJwk, type ReceiptPayload } from './receipts.ts'

export interface ReceiptConfig {
  keyEnv: string
  kid: string
  resourceBaseUrl?: string
}

export const RECEIPT_HEADER = 'x-receipt'
export const KEYS_DOCUMENT = 'tollgate-receipt-keys.json'

/** The receipt of this answer, or undefined when it was not paid. */
function payloadOf(ctx: RequestContext, url: string): ReceiptPayload | undefined {
  const issuedAt = Math.floor(Date.now() / 1000)
  const paid = settledPayment(ctx)
  if (paid) {
    return {
      network: paid.network, resourceUrl: url, payer: paid.payer, issuedAt, transaction: paid.transaction,
      amount: paid.amount, asset: paid.asset, requestId: ctx.id, ...(ctx.project ? { project: ctx.project.id } : {}),
    }
  }
  const credits = chargedCredits(ctx)
  if (!credits || !ctx.project) return undefined
  return {
    network: 'tollgate:credits', resourceUrl: url, payer: `project:${ctx.project.id}`, issuedAt,
    amount: String(credits), asset: 'credits', requestId: ctx.id, project: ctx.project.id,
  }
}

/** Adds the receipt to a v2 `PAYMENT-RESPONSE` (base64 JSON settle answer) under the extension's key. */
function intoPaymentResponse(header: string, jws: string): string {
  const settle = JSON.parse(Buffer.from(header, 'base64').toString()) as { extensions?: Record<string, unknown> }
  settle.extensions = { ...settle.extensions, 'offer-receipt': { info: { version: 1, receipt: { format: 'jws', signature: jws } } } }
  return Buffer.from(JSON.stringify(settle)).toString('base64')
}

/** The JWKS of every route's signer, one entry per kid. */
function keySet(routes: readonly DescribedRoute[]): () => unknown {
  const keys = new Map<string, PublicJwk>()
  for (const route of routes) {
    const jwk = (route.description as { publicJwk: PublicJwk }).publicJwk
    keys.set(`${jwk.kid}:${jwk.x}`, jwk)
  }
  const document = { keys: [...keys.values()] }
  return () => document
}

const receipt: PluginDefinition<ReceiptConfig> = {
  name: 'receipt',
  version: '1.0.0',
  // Below credit-meter (900) and x402-paywall (850): both have settled when this one runs.
  priority: 800,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      keyEnv: {
        type: 'string',
        pattern: '^[A-Z_][A-Z0-9_]*$',
        default: 'TOLLGATE_RECEIPT_KEY',
        description: 'Environment variable holding the Ed25519 signing key: a PKCS#8 PEM, or the 32-byte seed in base64url or hex.',
      },
      kid: {
        type: 'string',
        minLength: 1,
        maxLength: 200,
        default: 'tollgate-receipt-1',
        description: 'Key id in every receipt header and in the published key set (a DID URL such as did:web:api.example.com#receipt-1 suits the extension).',
      },
      resourceBaseUrl: {
        type: 'string',
        pattern: '^https?://[^/]+$',
        description: 'Public origin the receipt names the resource under. Default: the origin the request was sent to.',
      },
    },
  },
  wellKnown: { name: KEYS_DOCUMENT, build: keySet },
  create(config) {
    const text = process.env[config.keyEnv]
    if (!text) throw new Error(`environment variable ${config.keyEnv} (the receipt signing key) is not set`)
    const key = signingKeyFrom(text, config.kid)
    return {
      describe: () => ({ summary: `signed receipts (Ed25519, kid ${config.kid})`, publicJwk: key.publicJwk }),
      response(ctx) {
        const response = ctx.response
        if (!response || ctx.error || response.status >= 400) return
        const payload = payloadOf(ctx, resourceUrl(ctx, config.resourceBaseUrl))
        if (!payload) return
        const jws = signReceipt(key, payload)
        ctx.responseHeaders[RECEIPT_HEADER] = jws
        const settle = response.headers['payment-response']
        if (typeof settle === 'string') response.headers['payment-response'] = intoPaymentResponse(settle, jws)
        ctx.logFields.receipt = true
      },
    }
  },
}

export default receipt
