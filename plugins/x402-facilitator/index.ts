/**
 * `x402-facilitator` (handler): the x402 payment facilitator of the gateway spec at
 * `/x402/:chain/:network/:apiKey/:endpoint`. One route answers every chain, network and endpoint
 * (GET supported / health, POST verify / settle) and dispatches by the path segments, so unknown
 * values get a 404 naming the segment and a wrong method a 405.
 *
 * Each `chain/network` is served in process on a chain RPC (evm/ verify and settle, settlements
 * recorded in the store so each authorization transfers at most once), by an upstream facilitator,
 * or not at all (501); Solana networks run in process too (svm/). It also provides the `x402` error format.
 *
 * Auth, credits and rate limits are the route's other plugins (key-in-path-auth with scope x402,
 * credit-meter with apiType x402, rate-limit); see README.md.
 */
import type { PluginDefinition, RequestContext } from '../../core/proxy/plugin-api.ts'
import { facilitatorConfigSchema, type FacilitatorConfig } from './config.ts'
import { x402ErrorFormat } from './error-format.ts'
import { networkNotConfigured } from './failures.ts'
import type { Facilitator } from './facilitator.ts'
import { readJsonBody, readTarget, type FacilitatorTarget } from './request.ts'

const REQUIRED_PARAMS = ['chain', 'network', 'endpoint'] as const

function payerOf(body: unknown): string | undefined {
  const payer = (body as { payer?: unknown } | undefined)?.payer
  return typeof payer === 'string' && payer !== '' ? payer : undefined
}

async function serve(ctx: RequestContext, target: FacilitatorTarget, facilitator: Facilitator): Promise<void> {
  switch (target.endpoint) {
    case 'supported': {
      const { status, body } = await facilitator.supported(ctx.signal)
      return ctx.respond(status, body)
    }
    case 'health': {
      const health = await facilitator.health(ctx.signal)
      return ctx.respond(health.ok ? 200 : 503, health.ok ? { status: 'ok' } : { status: 'unavailable', error: health.message })
    }
    case 'verify': {
      const { status, body } = await facilitator.verify(readJsonBody(ctx), ctx.signal)
      ctx.logFields.x402Result = body.isValid ? 'valid' : body.invalidReason
      ctx.logFields.payer = payerOf(body)
      return ctx.respond(status, body)
    }
    case 'settle': {
      const { status, body } = await facilitator.settle(readJsonBody(ctx))
      ctx.logFields.x402Result = body.success ? 'settled' : body.errorReason
      ctx.logFields.payer = payerOf(body)
      if (body.transaction) ctx.logFields.tx = body.transaction
      return ctx.respond(status, body)
    }
  }
}

const x402Facilitator: PluginDefinition<FacilitatorConfig> = {
  name: 'x402-facilitator',
  version: '1.0.0',
  priority: 0,
  configSchema: facilitatorConfigSchema,
  // Raw, not json: GET and POST share the route, and the body messages are the spec's (request.ts).
  needs: () => ({ body: 'raw' }),
  errorFormats: { x402: x402ErrorFormat },
  async create(config, init) {
    const missing = REQUIRED_PARAMS.filter((param) => !init.routeParams.includes(param))
    if (missing.length) {
      throw new Error(`the route path ${init.route.path} lacks ${missing.map((p) => `:${p}`).join(', ')}; use /x402/:chain/:network/:apiKey/:endpoint`)
    }
    // The EVM and Solana code (viem, @solana/kit: hundreds of modules) loads only for a route that
    // serves x402, not in every gateway that merely has this plugin folder.
    const { buildNetworks } = await import('./networks.ts')
    const served = await buildNetworks(config, init)
    return {
      async handle(ctx) {
        const target = readTarget(ctx)
        ctx.logFields.x402 = `${target.label}/${target.endpoint}`
        const facilitator = served.get(target.label)
        if (!facilitator) throw networkNotConfigured(target.label)
        await serve(ctx, target, facilitator)
      },
      async close() {
        await Promise.allSettled([...served.values()].map((facilitator) => facilitator.close?.()))
      },
    }
  },
}

export default x402Facilitator
