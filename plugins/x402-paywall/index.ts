/**
 * `x402-paywall`: any route can charge per request with the x402 protocol.
 *
 * - request: without a payment → 402 with `PAYMENT-REQUIRED` (v2, base64 JSON) and the v1 JSON body
 *   `{x402Version: 1, error, accepts}`. With `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1) → match it
 *   to an offered network, verify it with that network's facilitator (built-in in process, or over
 *   HTTP); an invalid payment → 402 with the reason. The payment headers are never forwarded.
 * - response: the upstream's answer is held (the plugin asks the core to buffer it, capped by the
 *   route's maxResponseBodyBytes); below 400 the payment is settled, and only a successful
 *   settlement releases the content, with `PAYMENT-RESPONSE` (v2) / `X-PAYMENT-RESPONSE` (v1).
 *   A failed settlement → 402, content withheld. An answer ≥ 400 is passed on unsettled.
 * - binding: a verified payment belongs to the project whose request first presented it; another
 *   project's request with it → 409 `payment_claimed_by_other_project` (redemptions.ts `claim:`).
 *
 * Per use (`scheme: upto`, x402 v2 over Permit2): the client signs `price` as a maximum; the
 * settlement takes what the request used, the credit meter's charge × `pricePerCredit`, capped at
 * the maximum; nothing used, nothing sent.
 *
 * Discovery: each instance describes its route with these same offers; the core serves the
 * manifest built from them at `GET /.well-known/x402.json` (discovery.ts).
 *
 * CORS: every answer exposes the payment headers; `corsOrigins` adds Allow-Origin and preflights.
 */
import { createHash } from 'node:crypto'
import { GatewayError } from '../../core/proxy/plugin-api.ts'
import { chargedCredits } from '../credit-meter/index.ts'
import type { PluginDefinition, RequestContext } from '../../core/proxy/plugin-api.ts'
import { reasons } from '../x402-facilitator/evm/errors.ts'
import type { SettleResponse } from '../x402-facilitator/evm/types.ts'
import { paywallConfigSchema, type PaywallConfig } from './config.ts'
import type { PaidNetwork } from './facilitators.ts'
import { encodeHeader, paymentRequired, resourceUrl, type PaymentRequiredTexts } from './offers.ts'
import { authorizationKey, matchOffer, readPayment } from './payment-header.ts'
import { redemptionsFrom } from './redemptions.ts'
import { buildManifest, describePaywall } from './discovery.ts'
import { svmReasons } from '../x402-facilitator/svm/errors.ts'

const retryableAfterPending: ReadonlySet<string> = new Set([reasons.nonceAlreadyUsed, reasons.permit2InvalidNonce, svmReasons.simulationFailed])

const STATE = 'x402-paywall'
const EXPOSED = 'PAYMENT-REQUIRED, PAYMENT-RESPONSE, X-PAYMENT-RESPONSE'

/** The refusal of a payment another principal presented first (see redemptions.ts `claim:`). */
function claimedByOther(ctx: RequestContext, principal: string | null): GatewayError {
  if (principal?.startsWith(INTENT)) {
    ctx.logFields.x402Result = 'payment_claimed_by_other_buyer'
    return new GatewayError(409, 'payment_claimed_by_other_buyer',
      'this payment was first presented with another intent header value; only that request can complete it (sign a new payment to buy here)')
  }
  ctx.logFields.x402Result = 'payment_claimed_by_other_project'
  return new GatewayError(409, 'payment_claimed_by_other_project',
    'this payment was first presented by another project; only that project can redeem it (sign a new payment to pay here)')
}

const INTENT = 'intent:'
const INTENT_VALUE = /^[\x21-\x7e]{16,256}$/

/**
 * Whom a payment is bound to: the project of the request's key; on a route without auth with
 * `intentHeader`, the hash of that header's value (a secret of the buyer's, absent from the
 * payment, so a copy of a broadcast authorization cannot complete someone else's purchase);
 * otherwise nobody (the payment header is then a bearer credential).
 */
function principalOf(ctx: RequestContext, intentHeader: string | undefined): string | null {
  if (ctx.project) return ctx.project.id
  if (!intentHeader) return null
  const value = ctx.headers[intentHeader]
  if (typeof value !== 'string' || !INTENT_VALUE.test(value)) {
    throw new GatewayError(400, 'invalid_intent_header', `header ${intentHeader} is required with a payment: 16 to 256 printable ASCII characters (a random value; send the same one when you retry)`)
  }
  return INTENT + createHash('sha256').update(value).digest('hex')
}

interface PaidRequest {
  network: PaidNetwork
  version: 1 | 2
  /** The verify / settle body sent to the facilitator. */
  facilitatorBody: Record<string, unknown>
  key: string | undefined
  payer: string
  url: string
  /** upto: the price of one credit; the settled amount follows the credits used. */
  pricePerCredit?: string
  /** Bound to an intent header's value (a route without auth with `intentHeader`). */
  intentBound: boolean
  settled?: boolean
  /** The settlement that released the content (set once the delivery is claimed). */
  settlement?: SettledPayment & { asset: string }
  /** Set by a later plugin ({@link onPaymentSettled}); runs before the content is released. */
  onSettled?: (payment: SettledPayment) => Promise<void>
}

/** A payment the paywall verified on this request (it settles after the target answered). */
export interface VerifiedPayment {
  /** CAIP-2 network, e.g. `eip155:84532`. */
  network: string
  payer: string
  /** Atomic token units the payment is for (the settled amount of scheme exact). */
  amount: string
  /** True when the payment is bound to the request's `intentHeader` value (see config). */
  intentBound?: boolean
}

/** A payment settled on chain, about to release the content. */
export interface SettledPayment extends VerifiedPayment {
  transaction: string
}

/** The atomic amount of v2 (`amount`) or v1 (`maxAmountRequired`) requirements. */
function amountOf(facilitatorBody: Record<string, unknown>): string {
  const requirements = facilitatorBody.paymentRequirements as { amount?: string; maxAmountRequired?: string }
  return requirements.amount ?? requirements.maxAmountRequired ?? '0'
}

/**
 * The payment the paywall verified on this request, or undefined (no paywall on the route, or no
 * valid payment: the paywall then answered 402 before the target).
 */
export function verifiedPayment(ctx: RequestContext): VerifiedPayment | undefined {
  const paid = ctx.state.get(STATE) as PaidRequest | undefined
  if (!paid) return undefined
  return { network: paid.network.offer.caip2, payer: paid.payer, amount: amountOf(paid.facilitatorBody), intentBound: paid.intentBound }
}

/**
 * Runs `fn` once this request's payment is settled, before the paywall claims its delivery and
 * releases the answer, so what `fn` records (keyed by the transaction) is durable before the
 * client is told. `fn` may rewrite `ctx.response`. If it throws, the payment is remembered as
 * pending, so the client's retry with the same payment header comes through again (the
 * facilitator answers with the same settlement) instead of paying twice.
 */
export function onPaymentSettled(ctx: RequestContext, fn: (payment: SettledPayment) => Promise<void>): void {
  const paid = ctx.state.get(STATE) as PaidRequest | undefined
  if (!paid) throw new Error('onPaymentSettled: no x402 payment on this request')
  paid.onSettled = fn
}

/**
 * The payment settled for this request's answer, once the paywall released the content (response
 * phase; plugins of lower priority see it), with the asset it was paid in; undefined otherwise.
 */
export function settledPayment(ctx: RequestContext): (SettledPayment & { asset: string }) | undefined {
  return (ctx.state.get(STATE) as PaidRequest | undefined)?.settlement
}

const same = (text: string): PaymentRequiredTexts => ({ v1: text, v2: text })

/** The settle answer for a header: null fields dropped (optional in the protocol). */
function settleHeader(result: SettleResponse): string {
  return encodeHeader(Object.fromEntries(Object.entries(result).filter(([, value]) => value !== null && value !== undefined)))
}

function applyCors(ctx: RequestContext, origins: ReadonlySet<string>): boolean {
  ctx.responseHeaders['access-control-expose-headers'] = EXPOSED
  const origin = ctx.headers.origin
  if (!origin || (!origins.has('*') && !origins.has(origin))) return false
  ctx.responseHeaders['access-control-allow-origin'] = origins.has('*') ? '*' : origin
  if (!origins.has('*')) ctx.responseHeaders.vary = 'Origin'
  return true
}

/**
 * The settle body. upto: the requirements' amount becomes what the request used — the credits the
 * credit meter charged × pricePerCredit, capped at the signed maximum (no meter on the route: the
 * maximum).
 */
function settleBody(paid: PaidRequest, ctx: RequestContext): Record<string, unknown> {
  if (!paid.pricePerCredit) return paid.facilitatorBody
  const requirements = paid.facilitatorBody.paymentRequirements as { amount: string }
  const maximum = BigInt(requirements.amount)
  const credits = chargedCredits(ctx)
  const used = credits === undefined ? maximum : BigInt(credits) * BigInt(paid.pricePerCredit)
  const amount = used < maximum ? used : maximum
  ctx.logFields.x402Amount = amount.toString()
  return { ...paid.facilitatorBody, paymentRequirements: { ...requirements, amount: amount.toString() } }
}

const x402Paywall: PluginDefinition<PaywallConfig> = {
  name: 'x402-paywall',
  version: '1.0.0',
  // After auth (1250), gates (1000), rate-limit (910) and credit-meter (900): a refused or throttled
  // request never costs a verify on the chain.
  priority: 850,
  configSchema: paywallConfigSchema,
  needs: () => ({ responseBody: true }),
  // GET /.well-known/x402.json: built from the same offers as the 402 answers (discovery.ts).
  wellKnown: { name: 'x402.json', build: buildManifest },
  async create(config, init) {
    // viem and @solana/kit load with the first paywall route, not in every gateway (facilitators.ts).
    const { openPaidNetworks } = await import('./facilitators.ts')
    const networks = await openPaidNetworks(config, init)
    const offers = networks.map((network) => network.offer)
    const redemptions = redemptionsFrom(init.store.documents('x402-paywall'))
    const corsOrigins = new Set(config.corsOrigins)

    const ask = (ctx: RequestContext, url: string, texts: PaymentRequiredTexts, payer?: string) => {
      const answer = paymentRequired(offers, url, config, texts, { payer, method: ctx.method })
      ctx.respond(answer.status, answer.body, answer.headers)
    }

    return {
      describe: () => describePaywall(config, offers),
      async close() {
        await Promise.allSettled(networks.map((network) => network.facilitator.close?.()))
      },
      async request(ctx) {
        // Payment credentials: redacted, and never sent upstream.
        ctx.secretHeaders.add('payment-signature')
        ctx.secretHeaders.add('x-payment')
        if (config.intentHeader) ctx.secretHeaders.add(config.intentHeader)
        const corsAllowed = applyCors(ctx, corsOrigins)
        const preflightMethod = ctx.headers['access-control-request-method']
        if (ctx.method === 'OPTIONS' && corsAllowed && typeof preflightMethod === 'string') {
          ctx.respond(204, Buffer.alloc(0), {
            'access-control-allow-methods': preflightMethod,
            'access-control-allow-headers': 'PAYMENT-SIGNATURE, X-PAYMENT, Content-Type, Access-Control-Expose-Headers',
            'access-control-max-age': '600',
          })
          delete ctx.response!.headers['content-type']
          return
        }
        if (networks.length === 0) throw new GatewayError(503, 'paywall_unavailable', 'no payment network is available for this route')
        const url = resourceUrl(ctx, config.resourceBaseUrl)
        const read = readPayment(ctx)
        if (read.kind === 'none') return ask(ctx, url, { v2: 'PAYMENT-SIGNATURE header is required', v1: 'X-PAYMENT header is required' })
        if (read.kind === 'invalid') return ask(ctx, url, same(read.message))
        const offer = matchOffer(offers, read.version, read.payload)
        if (!offer) return ask(ctx, url, same('No matching payment requirements'))
        const network = networks.find((n) => n.offer === offer)!
        const facilitatorBody = read.version === 2
          ? { x402Version: 2, paymentPayload: read.payload, paymentRequirements: offer.v2 }
          : { x402Version: 1, paymentPayload: read.payload, paymentRequirements: { ...offer.v1, resource: url } }
        const key = authorizationKey(offer, read.payload)
        // Before verify: a purchase without its intent costs no chain read.
        const principal = principalOf(ctx, config.intentHeader)
        const { body: verdict } = await network.facilitator.verify(facilitatorBody, ctx.signal)
        ctx.logFields.payer = verdict.payer || undefined
        if (!verdict.isValid) {
          // A retry after `settlement_pending`: the nonce is used by our own transaction (EVM: EIP-3009 or Permit2), or our
          // own transaction no longer simulates (Solana: already processed).
          const retryable = key !== undefined && retryableAfterPending.has(verdict.invalidReason ?? '')
          if (!retryable || !(await redemptions.isPending(key))) {
            if (retryable && (await redemptions.boundElsewhere(key, principal))) throw claimedByOther(ctx, principal)
            ctx.logFields.x402Result = verdict.invalidReason
            return ask(ctx, url, same(verdict.invalidReason ?? 'invalid_payment'), verdict.payer)
          }
        }
        // Rule: a payment settles, retries and redeems only for the principal whose request first
        // presented it (its signature verified above). A copy on another project's key — the
        // authorization is public once broadcast — is refused before anything is settled; of two
        // projects racing with one payment, the first to bind wins (atomic in the store).
        if (key !== undefined && !(await redemptions.bind(key, principal))) throw claimedByOther(ctx, principal)
        ctx.logFields.x402Network = offer.caip2
        ctx.state.set(STATE, {
          network, version: read.version, facilitatorBody, key, payer: verdict.payer, url,
          pricePerCredit: config.scheme === 'upto' ? config.pricePerCredit : undefined,
          intentBound: principal?.startsWith(INTENT) ?? false,
        } satisfies PaidRequest)
      },

      async response(ctx) {
        const paid = ctx.state.get(STATE) as PaidRequest | undefined
        if (!paid || paid.settled) return
        paid.settled = true
        // The service failed or refused: nothing is charged, the authorization stays unused.
        if (ctx.error || !ctx.response || ctx.response.status >= 400) return
        const body = settleBody(paid, ctx)
        const { body: result } = await paid.network.facilitator.settle(body)
        const headerName = paid.version === 2 ? 'payment-response' : 'x-payment-response'
        ctx.logFields.x402Result = result.success ? 'settled' : result.errorReason
        if (result.transaction) ctx.logFields.tx = result.transaction
        if (result.success) {
          if (paid.onSettled) {
            try {
              await paid.onSettled({ network: paid.network.offer.caip2, payer: result.payer || paid.payer, amount: amountOf(body), transaction: result.transaction })
            } catch (error) {
              if (paid.key !== undefined) await redemptions.markPending(paid.key, result.transaction)
              throw error
            }
          }
          if (paid.key === undefined || (await redemptions.claimDelivery(paid.key, result.transaction))) {
            ctx.response.headers[headerName] = settleHeader(result)
            const requirements = body.paymentRequirements as { asset?: string }
            paid.settlement = { network: paid.network.offer.caip2, payer: result.payer || paid.payer, amount: amountOf(body), transaction: result.transaction, asset: requirements.asset ?? '' }
            return
          }
          ctx.logFields.x402Result = reasons.duplicateSettlement
          const refused: SettleResponse = { ...result, success: false, errorReason: reasons.duplicateSettlement, errorMessage: 'this payment was already redeemed' }
          ctx.response = paymentRequired(offers, paid.url, config, same(reasons.duplicateSettlement), {
            payer: paid.payer, method: ctx.method, extraHeaders: { [headerName]: settleHeader(refused) },
          })
          return
        }
        if (result.errorReason === reasons.settlementPending && paid.key !== undefined) await redemptions.markPending(paid.key, result.transaction)
        ctx.response = paymentRequired(offers, paid.url, config, same(result.errorReason ?? 'settlement_failed'), {
          payer: paid.payer, method: ctx.method, extraHeaders: { [headerName]: settleHeader(result) },
        })
      },
    }
  },
}

export default x402Paywall
