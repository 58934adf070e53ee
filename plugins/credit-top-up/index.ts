/**
 * `credit-top-up`: a route handler that sells project credits for an x402 payment, so one balance
 * serves both rails (API-key traffic and x402).
 *
 * The route carries an auth plugin (the project that buys, from its key) and `x402-paywall` (the
 * price of one purchase). The handler answers once the payment is verified; the paywall settles
 * it after, and before it releases the answer it runs this plugin's hook: the credits
 * (settled atomic units ÷ `unitsPerCredit`, rounded down) are granted to the project with the grant
 * id `x402:<CAIP-2 network>:<transaction>`, durable before the client is answered, and the answer
 * becomes the grant and the new balance. The same settlement can never grant twice: a replayed
 * payment header fails verify (its nonce is used), a retry after `settlement_pending` settles to
 * the same transaction, and the grant id is that transaction.
 *
 * ```yaml
 * - name: buy-credits
 *   methods: [POST]
 *   path: /credits/:apiKey/buy
 *   errorFormat: x402
 *   handler: { name: credit-top-up, config: { unitsPerCredit: "100" } }   # 10000 units = 100 credits
 *   plugins:
 *     - { name: key-in-path-auth, config: { param: apiKey } }
 *     - { name: x402-paywall, config: { price: "10000", payTo: "0x…", networks: [ … ] } }
 * ```
 */
import { errors, GatewayError } from '../../core/proxy/plugin-api.ts'
import type { PluginDefinition, RequestContext } from '../../core/proxy/plugin-api.ts'
import { scheduleBounds } from '../../core/proxy/plugin-api.ts'
import { onPaymentSettled, verifiedPayment } from '../x402-paywall/index.ts'

export interface CreditTopUpConfig {
  /** Atomic token units that buy one credit (a positive integer, as a decimal string). */
  unitsPerCredit: string
  /** The grant's reason in the ledger. */
  reason: string
}

const creditTopUp: PluginDefinition<CreditTopUpConfig> = {
  name: 'credit-top-up',
  version: '1.0.0',
  priority: 0,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['unitsPerCredit'],
    properties: {
      unitsPerCredit: {
        type: 'string',
        pattern: '^[1-9][0-9]{0,77}$',
        description: 'Atomic token units that buy one credit, e.g. "100": a payment of 10000 units (0.01 USDC) buys 100 credits. Rounded down.',
      },
      reason: { type: 'string', pattern: '^[\\x21-\\x7e][\\x20-\\x7e]{0,63}$', default: 'x402', description: "The grant's reason in the project's credit ledger." },
    },
  },
  create(config, init) {
    const unitsPerCredit = BigInt(config.unitsPerCredit)
    return {
      async handle(ctx: RequestContext) {
        const project = ctx.project
        if (!project) throw errors.internal(`route ${ctx.routeName} runs credit-top-up without an auth plugin before it`)
        const payment = verifiedPayment(ctx)
        if (!payment) throw errors.internal(`route ${ctx.routeName} runs credit-top-up without x402-paywall`)
        const creditsFor = (units: string): number => {
          const credits = BigInt(units) / unitsPerCredit
          // A price below one credit, or past what a balance can hold: a config mistake. Thrown
          // here (before the settlement) it is a 500 and the payment stays unsettled.
          if (credits < 1n || credits > BigInt(Number.MAX_SAFE_INTEGER)) {
            throw errors.internal(`route ${ctx.routeName}: a payment of ${units} units buys ${credits} credits at unitsPerCredit ${config.unitsPerCredit}`)
          }
          return Number(credits)
        }
        // Until the payment is settled nothing is granted; the hook turns this answer into the grant.
        ctx.respond(200, { project: project.id, credits: creditsFor(payment.amount) })
        onPaymentSettled(ctx, async (settled) => {
          // What was settled decides (with scheme upto it may be less than what was verified).
          const amount = creditsFor(settled.amount)
          const period = scheduleBounds(project.credits, Date.now()).key
          const id = `x402:${settled.network}:${settled.transaction}`
          const { created, balance } = await init.store.grantCredits({
            id, projectId: project.id, period, allocation: project.credits.allocation, amount, reason: config.reason, actor: settled.payer || 'x402',
          })
          // The grant id is the transaction: one that already went to another project is never
          // answered here (nor its balance shown). The paywall binds a payment to the project that
          // first presented it, so this is the last line, not the first.
          if (!created && balance.projectId !== project.id) {
            ctx.logFields.x402Result = 'payment_claimed_by_other_project'
            throw new GatewayError(409, 'payment_claimed_by_other_project', 'this payment already bought credits for another project')
          }
          ctx.logFields.creditsGranted = created ? amount : 0
          const { allocation, granted, used, remaining } = balance
          // The handler's answer (status, headers) stays; its body becomes the grant.
          ctx.response!.body = Buffer.from(JSON.stringify({
            project: project.id,
            granted: created ? amount : 0,
            grant: { id, amount, reason: config.reason, payer: settled.payer, network: settled.network, transaction: settled.transaction },
            period: balance.period,
            balance: { allocation, granted, used, remaining },
          }))
        })
      },
    }
  },
}

export default creditTopUp
