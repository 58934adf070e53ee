/**
 * `credit-meter`: charges each request to its project's credit allocation.
 *
 * - request (or body, for per-item batches): reserve the cost; 402 `credits_exhausted` when the
 *   balance does not cover it. Reservations count against the balance at once: no overspend.
 * - response (before the head is written, for every answer): commit, or release when the gateway
 *   or the service failed (see refund-policy.ts); a handler's `credits.refund` state gives part back.
 * - done: release a reservation still pending (the client went away before its answer); settle
 *   again if a later plugin replaced the answer or the upstream failed after the head (reset,
 *   stall past its body timeout, short body: the client never got the whole answer, so the
 *   failure is refunded like any failure of the service); close the reservation (the store
 *   forgets it); record usage and the credits metric.
 *
 * It also serves `GET /admin/projects/:id/usage` on the admin listener.
 *
 * ```yaml
 * plugins:
 *   - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 2, perItem: { path: proofs } } }
 * ```
 */
import { randomBytes } from 'node:crypto'
import { errors, RequestSlot } from '../../core/proxy/plugin-api.ts'
import type { CounterSeries, PluginDefinition, PluginInit, RequestContext, ResponseState } from '../../core/proxy/plugin-api.ts'
import { sharedSeriesCounter } from '../_shared/metrics.ts'
import { countItems } from './items.ts'
import { CreditLedger, type MeteredRequest } from './ledger.ts'
import type { UsageEvent } from '../../core/store/types.ts'
import { isPriced, jsonRpcPrice, measuredCost, startedKiB, type MethodPrices } from './pricing.ts'
import { pricingSchema } from './pricing-schema.ts'
import { checkMethodPrices } from './pricing-check.ts'
import { isCharged, outcomeOf, type RefundPolicy } from './refund-policy.ts'
import { USAGE_ADMIN_PATH, usageHandler } from './usage-route.ts'

export const API_TYPES = ['PRIVNET_ZKPAAS', 'PRIVNET_RPC', 'x402', 'MIRROR', 'EVENTS'] as const
export type ApiType = (typeof API_TYPES)[number]

export interface CreditMeterConfig {
  apiType?: ApiType
  cost: number
  perItem?: { path: string }
  /** Price per JSON-RPC method, with a default (pricing.ts). */
  jsonrpc?: MethodPrices
  /** Credits per started KiB of the request body, on top of the price. */
  perKiB?: number
  /** Two-phase: reserve the price, charge what the upstream reports in this header (at most the reservation). */
  actual?: { header: string }
  refundStatuses: number[]
  refundUpstream5xx: boolean
}

/** ctx.state key a handler sets to the credits it gives back (failed items of a batch). */
export const REFUND_STATE = 'credits.refund'

/** What the meter keeps of a request, in {@link METER}: one object with every field, made at the reservation. */
class MeterState {
  /**
   * The answer the meter last settled for (`settled` once it did); if the core replaces it, or the
   * upstream fails after the head (the error arrives once the answer is under way), done settles
   * again. Fields of this object rather than an object of their own: one allocation less a request.
   */
  settled = false
  settledResponse: ResponseState | undefined = undefined
  settledStatus: number | undefined = undefined
  settledError: RequestContext['error'] = undefined

  constructor(
    readonly metered: MeteredRequest,
    /** The request: what the settlement's last step writes its headers to. */
    readonly ctx: RequestContext,
    /** Two-phase metering: the response header the upstream reports its measured cost in. */
    readonly actualHeader: string | undefined,
  ) {}
}

/** The meter's record of the request (a slot, not `ctx.state`: no Map made per request). */
const METER = new RequestSlot<MeterState>()

// Client-chosen x-request-id values can repeat, so reservation ids get a per-boot suffix of their own.
const BOOT = randomBytes(4).toString('hex')
let sequence = 0
/** Reservation ids on an in-process engine (`Store.immediate`): `cm:` and the sequence in decimal (radix 36 is a runtime call). */
const LOCAL_ID_PREFIX = 'cm:'

function requestedRefund(ctx: RequestContext): number {
  // Read without making ctx.state's map: nearly every request has none.
  const value = ctx.stateValue(REFUND_STATE)
  return typeof value === 'number' && Number.isFinite(value) ? value : 0
}

/**
 * The credits this request is charged if its answer stands (reserved minus a handler's refund),
 * or undefined when no credit meter ran on it. Lets a later plugin price the request by use (the
 * x402 paywall's `upto` scheme) with the meter's own cost rules (per request, per item).
 */
export function chargedCredits(ctx: RequestContext): number | undefined {
  const state = METER.get(ctx)
  if (!state) return undefined
  const { metered } = state
  if (metered.state === 'released') return 0
  // Before the meter settles, a handler's refund is only requested; after, it is in `refunded`.
  const refund = Math.max(metered.refunded, Math.min(refundDue(ctx, state), metered.amount))
  return metered.amount - refund
}

/**
 * What goes back of a charged reservation: a handler's requested refund, and with two-phase
 * metering the part of the reservation the upstream's measured cost did not use.
 */
function refundDue(ctx: RequestContext, state: MeterState): number {
  const requested = Math.max(0, requestedRefund(ctx))
  if (state.actualHeader === undefined) return requested
  const actual = measuredCost(ctx.response?.headers, state.actualHeader, state.metered.amount)
  return actual === undefined ? requested : Math.max(requested, state.metered.amount - actual)
}

/** The reservation of a metered request (the estimate or maximum), or undefined when none was made. */
export function reservedCredits(ctx: RequestContext): number | undefined {
  return METER.get(ctx)?.metered.amount
}

/** Response headers of a metered answer: what it cost and what is left (README "Cost headers"). */
export const CHARGED_HEADER = 'x-credits-charged'
export const REMAINING_HEADER = 'x-credits-remaining'
/** Two-phase routes only: what was reserved before the answer (the estimate or maximum). */
export const RESERVED_HEADER = 'x-credits-reserved'

/**
 * Stamps the settled cost on the answer and its access-log line. Runs in the response phase, before
 * the head is written; a charge changed later (done phase) is in the log and the ledger only.
 */
function costHeaders(ctx: RequestContext, metered: MeteredRequest): void {
  const charged = CreditLedger.charged(metered)
  const remaining = CreditLedger.remaining(metered)
  ctx.responseHeaders[CHARGED_HEADER] = integerText(charged)
  ctx.responseHeaders[REMAINING_HEADER] = integerText(remaining)
  ctx.logFields.creditsCharged = charged
  ctx.logFields.creditsRemaining = remaining
}

/** Below it an integer is a small integer to V8, whose decimal text is cheap. */
const SMALL_INTEGER_LIMIT = 2 ** 30

/**
 * Decimal text of a credit figure. A balance of 2^30 and more is a double to V8, and `String` of a
 * double runs its shortest-float algorithm (~500 instructions); an integer is two small integers'
 * texts, billions and the rest, at about a third of the cost (bench/RESULTS.md, session 12).
 */
export function integerText(n: number): string {
  if (n < SMALL_INTEGER_LIMIT || n > Number.MAX_SAFE_INTEGER || !Number.isInteger(n)) return String(n)
  const billions = Math.floor(n / 1e9)
  const rest = String(n - billions * 1e9)
  return String(billions) + '000000000'.slice(rest.length) + rest
}

/** Two-phase and priced routes: the reservation beside the charge, on the answer and the log line. */
function reservedHeader(ctx: RequestContext, metered: MeteredRequest): void {
  ctx.responseHeaders[RESERVED_HEADER] = String(metered.amount)
  ctx.logFields.creditsReserved = metered.amount
}

/** What the price reads of the body: JSON for items and methods, the bytes for size. */
function bodyNeed(config: CreditMeterConfig): 'json' | 'raw' | undefined {
  if (config.perItem || config.jsonrpc) return 'json'
  return config.perKiB ? 'raw' : undefined
}

function summaryOf(config: CreditMeterConfig, apiType: string): string {
  const base = config.jsonrpc
    ? `JSON-RPC per method (default ${config.jsonrpc.default}, ${Object.keys(config.jsonrpc.methods).length} priced)`
    : `${config.cost} credit(s) per ${config.perItem ? `item of ${config.perItem.path}` : 'request'}`
  const size = config.perKiB ? ` + ${config.perKiB} per KiB of body` : ''
  const actual = config.actual ? `, reserved then charged as the upstream's ${config.actual.header}` : ''
  return `${base}${size}${actual} (${apiType})`
}

function createMeter(config: CreditMeterConfig, init: PluginInit) {
  const apiType = config.apiType ?? init.route.apiType
  if (!apiType || !(API_TYPES as readonly string[]).includes(apiType)) {
    throw new Error(`apiType is required (on the plugin or the route) and must be one of ${API_TYPES.join(', ')}; got ${apiType ?? 'none'}`)
  }
  const ledger = new CreditLedger(init.store)
  const policy: RefundPolicy = { refundStatuses: new Set(config.refundStatuses), refundUpstream5xx: config.refundUpstream5xx }
  // Bumped on every charged request: a series counter (one addition), not prom-client's inc, which
  // hashes the label set into a new string and looks it up in a dictionary on each call.
  const consumed = sharedSeriesCounter(init.metrics, 'tollgate_credits_consumed_total', 'Credits charged (after refunds), by project and API type.', ['project', 'api_type'])
  const consumedBy = new Map<string, CounterSeries>()
  const consumedOf = (projectId: string) => {
    let series = consumedBy.get(projectId)
    if (series === undefined) {
      series = consumed.series([projectId, apiType])
      consumedBy.set(projectId, series)
    }
    return series
  }
  // Everything of a reservation id after the request id, built once per route instance.
  const idSuffix = `:${init.routeName}:${BOOT}.`
  init.adminRoute('GET', USAGE_ADMIN_PATH, usageHandler(init, ledger))

  const priced = isPriced(config)
  const readsBody = bodyNeed(config) !== undefined
  if (config.jsonrpc) checkMethodPrices(config.jsonrpc, init.route.handler)
  /** Priced routes only (pricing.ts): the flat path below stays as it was. */
  const price = (ctx: RequestContext): number => {
    let amount = config.jsonrpc ? jsonRpcPrice(config.jsonrpc, ctx.body?.json) : config.cost * (config.perItem ? countItems(ctx.body?.json, config.perItem.path) : 1)
    if (config.perKiB) amount += config.perKiB * startedKiB(ctx.body?.raw.length ?? 0)
    return amount
  }

  // The embedded engine answers reservations and usage at once: then reserving and booking cost no
  // promise and no microtask turn (the commit still waits for its group commit on disk).
  const immediate = init.store.immediate
  // A shared engine answers from its credit lease most of the time: then no promise either. Both buffer usage.
  const quick = init.store.quick
  const usageNow = immediate ?? quick
  const actualHeader = priced ? config.actual?.header : undefined
  const keep = (ctx: RequestContext, metered: MeteredRequest): void => {
    METER.set(ctx, new MeterState(metered, ctx, actualHeader))
  }

  const reserve = (ctx: RequestContext): Promise<void> | undefined => {
    // Only a route without an auth plugin gets here without a project: an operator mistake.
    if (!ctx.project) throw errors.internal(`route ${ctx.routeName} runs credit-meter without an auth plugin before it`)
    let amount: number
    if (priced) amount = price(ctx)
    else {
      const items = config.perItem ? countItems(ctx.body?.json, config.perItem.path) : 1
      amount = config.cost * items
      if (config.perItem) ctx.logFields.items = items
    }
    if (amount === 0) return
    if (immediate !== undefined) {
      // The in-process engine keeps reservations in this process's memory only: the sequence makes
      // the id unique there, and a short id is one flat string, hashed at once by the ledger's map
      // (the long form is a rope of three strings, flattened and hashed on every request).
      keep(ctx, ledger.reserveNow(immediate, LOCAL_ID_PREFIX + ++sequence, ctx.project, apiType, amount))
      return
    }
    const id = ctx.id + idSuffix + (++sequence).toString(36)
    if (quick !== undefined) {
      const metered = ledger.tryReserveNow(quick, id, ctx.project, apiType, amount)
      if (metered !== undefined) {
        keep(ctx, metered)
        return
      }
    }
    return ledger.reserve(id, ctx.project, apiType, amount).then((metered) => keep(ctx, metered))
  }

  /** The settlement's last step, once it is on disk: what the answer and its log line show. */
  const settled = (state: MeterState): void => {
    const ctx = state.ctx
    state.settled = true
    state.settledResponse = ctx.response
    state.settledStatus = ctx.response?.status
    state.settledError = ctx.error
    costHeaders(ctx, state.metered)
    if (priced) reservedHeader(ctx, state.metered)
    // The upstream's accounting header is the gateway's business, not the client's.
    if (state.actualHeader !== undefined && ctx.response) delete ctx.response.headers[state.actualHeader]
  }

  // Not an async function: on every request that would be a promise, an await and its closures more.
  const settle = (state: MeterState, ctx: RequestContext): Promise<void> => {
    const charged = isCharged(outcomeOf(ctx), policy)
    return ledger.settleThen(state.metered, charged, charged ? refundDue(ctx, state) : 0, settled, state)
  }

  const usageFailed = (error: unknown) => init.log.error({ err: error }, 'could not record usage')

  /** Metrics and usage of a finished request (synchronous: the store buffers usage). */
  const book = (ctx: RequestContext, state: MeterState | undefined) => {
    if (!ctx.project) return
    const credits = CreditLedger.charged(state?.metered)
    if (credits > 0) consumedOf(ctx.project.id).inc(credits)
    // 499: the client went away before any answer. A failure after the head counts as its 502/504.
    const status = ctx.error?.status ?? ctx.response?.status ?? 499
    const failed = ctx.error !== undefined || status >= 400
    const event: UsageEvent = {
      projectId: ctx.project.id,
      apiType,
      at: Date.now(),
      requests: 1,
      credits,
      errors: failed ? 1 : 0,
      route: init.routeName,
      status,
      latencyMs: performance.now() - ctx.startedAt,
    }
    if (usageNow === undefined) {
      init.store.recordUsage(event).catch(usageFailed)
      return
    }
    try {
      usageNow.recordUsage(event)
    } catch (error) {
      usageFailed(error)
    }
  }

  /** The unusual ends: a reservation still pending, or an answer replaced after the meter settled. */
  const reconcile = async (ctx: RequestContext, state: MeterState) => {
    try {
      // Pending: the client went away before its answer was decided. Replaced: a plugin after
      // the meter turned the answer into another one, or the upstream failed after the head;
      // the ledger follows what the client actually received.
      if (state.metered.state === 'pending') await ledger.release(state.metered)
      else await settle(state, ctx)
    } catch (error) {
      init.log.error({ err: error, reqId: ctx.id }, 'could not settle a credit reservation; it is released at the next start if still pending')
    }
    ledger.close(state.metered)
    book(ctx, state)
  }

  // The steps return the store's promise rather than wrap it in async functions of their own: they
  // run on every request, and each wrapper is a promise and a microtask more.
  return {
    // For `tollgate routes`; read once per table.
    describe: () => ({
      summary: summaryOf(config, apiType),
      apiType, cost: config.cost, ...(config.perItem ? { perItem: config.perItem.path } : {}),
      ...(config.jsonrpc ? { jsonrpc: config.jsonrpc } : {}), ...(config.perKiB ? { perKiB: config.perKiB } : {}),
      ...(config.actual ? { actual: config.actual } : {}),
    }),
    request(ctx: RequestContext) {
      ctx.apiType = apiType
      if (!readsBody) return reserve(ctx)
    },
    body(ctx: RequestContext) {
      if (readsBody) return reserve(ctx)
    },
    response(ctx: RequestContext) {
      const state = METER.get(ctx)
      if (state) return settle(state, ctx)
    },
    done(ctx: RequestContext) {
      const state = METER.get(ctx)
      if (state) {
        // An error after the settlement is a failure after the head: the client did not receive
        // the whole answer, and the policy decides again (a failure of the service is refunded).
        const replaced =
          state.settled && (state.settledResponse !== ctx.response || state.settledStatus !== ctx.response?.status || state.settledError !== ctx.error)
        if (state.metered.state === 'pending' || replaced) return reconcile(ctx, state)
        ledger.close(state.metered)
      }
      book(ctx, state)
    },
  }
}

const creditMeter: PluginDefinition<CreditMeterConfig> = {
  name: 'credit-meter',
  version: '1.0.0',
  priority: 900,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      apiType: {
        enum: [...API_TYPES],
        description: "API type the credits and usage are booked under. Default: the route's apiType.",
      },
      cost: { type: 'integer', minimum: 0, default: 1, description: 'Credits per request, or per item when perItem is set.' },
      perItem: {
        type: 'object',
        additionalProperties: false,
        required: ['path'],
        description: 'Charge cost × the number of items of a JSON array in the body (a batch); reads the body.',
        properties: {
          path: {
            type: 'string',
            pattern: '^[A-Za-z0-9_]+(\\.[A-Za-z0-9_]+)*$',
            description: 'Dot path of the array in the JSON body, e.g. proofs. No array there counts as one item.',
          },
        },
      },
      ...pricingSchema,
      refundStatuses: {
        type: 'array',
        items: { type: 'integer', minimum: 400, maximum: 599 },
        uniqueItems: true,
        default: [502, 504],
        description: 'Answer statuses whose credits are given back (upstream unreachable, upstream timeout).',
      },
      refundUpstream5xx: {
        type: 'boolean',
        default: true,
        description: "Also give back credits of any 5xx the upstream or handler answered. The gateway's own 5xx are always refunded.",
      },
    },
  },
  needs: (config) => {
    const body = bodyNeed(config)
    return body ? { body } : {}
  },
  create: (config, init) => createMeter(config, init),
}

export default creditMeter
