/**
 * `response-cache`: an in-memory cache of upstream GET answers, bounded in bytes, with request
 * coalescing. Only 200 answers are stored, for as long as the upstream's `cache-control` allows
 * (`s-maxage`/`max-age`), capped by `maxTtlSeconds`. A hit answers in the request phase with the
 * stored status, headers and body plus `Age`; every answer of a cacheable request carries
 * `X-Cache: HIT` or `MISS`.
 *
 * The key is route + upstream URL + upstream path + normalised query (mirror rules: keys
 * lower-cased and sorted, see `normaliseQuery`); it holds no header, so credentials never reach
 * it. Routes may share one byte-bounded cache (`pool`); each has its own otherwise.
 *
 * Coalescing: the first miss of a key is the leader and goes upstream; identical requests arriving
 * meanwhile wait for the leader's response phase and get a copy of its answer (X-Cache: HIT)
 * whatever its status, when it is shareable (no no-store/private/no-cache, no set-cookie). If
 * the leader fails talking to the upstream (502/504), they get the same error, so one dead
 * upstream costs one timeout, not one per waiting client. If the leader's answer is not shareable
 * they go upstream each on their own; if its client went away or a later plugin refused it, they
 * start over (one becomes the new leader; after 3 such rounds a request goes upstream alone).
 *
 * Priorities: runs at 600, after auth (1250), rate-limit (910), credit-meter (900) and validators
 * (800), so hits are authenticated, rate limited and charged (`chargeHits: false` refunds them),
 * and invalid requests never reach the cache. Its response phase runs after mirror-links (700),
 * so stored bodies already carry the gateway's links.
 *
 * ```yaml
 * plugins:
 *   - { name: response-cache, config: { maxBytes: 67108864, maxTtlSeconds: 60 } }
 * ```
 */
import { GatewayError } from '../../core/proxy/plugin-api.ts'
import type { PluginDefinition, RequestContext, ResponseState } from '../../core/proxy/plugin-api.ts'
import { normaliseQuery } from '../mirror-validate/rules.ts'
import { sharedCounter } from '../_shared/metrics.ts'
import { ageOf, storedAnswer, type StoredAnswer } from './entry.ts'
import { declaredSeconds, freshSeconds, isShareable } from './freshness.ts'
import { coalescedCounter } from '../_shared/coalesce.ts'
import { acquireStore, type Flight, type FlightOutcome } from './store.ts'

export interface ResponseCacheConfig {
  pool?: string
  maxBytes: number
  maxEntryBytes?: number
  maxTtlSeconds: number
  coalesce: boolean
  chargeHits: boolean
  followUpstream: boolean
}

const STATE = 'response-cache'
/**
 * ctx.state key a plugin ahead of the cache (priority > 600) may set to the seconds this answer may
 * be kept: mirror-validate sets it per route class (a transaction by id is immutable). With
 * followUpstream (default) it applies only when the upstream declares no s-maxage/max-age; without,
 * it replaces the upstream's. Still capped by maxTtlSeconds; 0 means do not store.
 */
export const CACHE_TTL_STATE = 'cache.ttlSeconds'
/** ctx.state key the credit-meter reads for credits to give back (plugins brief convention). */
const CREDITS_REFUND = 'credits.refund'
/** Errors of the leader's upstream call that its followers get as well. */
const SHARED_ERRORS = new Set(['upstream_unavailable', 'upstream_timeout', 'upstream_response_too_large'])
/** A request whose leaders keep ending without an outcome stops waiting and goes upstream alone. */
const MAX_WAITS = 3

interface MissState {
  key: string
  flight?: Flight
}

/** Resolves with the flight's outcome, or undefined if the client goes away first. */
function waitFor(flight: Flight, ctx: RequestContext): Promise<FlightOutcome | undefined> {
  if (ctx.aborted) return Promise.resolve(undefined)
  const signal = ctx.signal
  return new Promise((resolve) => {
    const onAbort = () => resolve(undefined)
    signal.addEventListener('abort', onAbort, { once: true })
    void flight.promise.then((outcome) => {
      signal.removeEventListener('abort', onAbort)
      resolve(outcome)
    })
  })
}

/** What the leader's followers get, once its answer is known (response phase). */
function outcomeOf(ctx: RequestContext, answer: StoredAnswer | undefined): FlightOutcome {
  if (ctx.aborted) return { kind: 'retry' }
  if (ctx.error) {
    return ctx.upstreamStatus === undefined && SHARED_ERRORS.has(ctx.error.code) ? { kind: 'error', error: ctx.error } : { kind: 'retry' }
  }
  if (ctx.upstreamStatus === undefined) return { kind: 'retry' }
  return answer ? { kind: 'answer', answer } : { kind: 'bypass' }
}

const responseCache: PluginDefinition<ResponseCacheConfig> = {
  name: 'response-cache',
  version: '1.0.0',
  priority: 600,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      pool: {
        type: 'string',
        pattern: '^[A-Za-z0-9_.:-]+$',
        description: 'Name of a cache several routes share, bounded together by maxBytes (keys still hold the route). Default: a cache of its own for this route.',
      },
      maxBytes: {
        type: 'integer',
        minimum: 1024,
        default: 67108864,
        description: 'Bound of the cache in bytes (bodies + headers + keys); least recently used entries are evicted past it.',
      },
      maxEntryBytes: {
        type: 'integer',
        minimum: 1,
        description: 'Largest single entry stored, bytes; bigger answers pass through uncached. Default: maxBytes.',
      },
      maxTtlSeconds: {
        type: 'number',
        exclusiveMinimum: 0,
        default: 60,
        description: "Longest time an answer is served from the cache, whatever the upstream's max-age says.",
      },
      coalesce: {
        type: 'boolean',
        default: true,
        description: 'Concurrent identical misses make one upstream request; the others wait for its answer.',
      },
      chargeHits: {
        type: 'boolean',
        default: true,
        description: 'Charge credits for answers served from the cache (credit-meter runs first); false refunds them.',
      },
      followUpstream: {
        type: 'boolean',
        default: true,
        description:
          "true: an answer whose cache-control has s-maxage or max-age is kept that long (minus its Age, capped by maxTtlSeconds), even where a plugin set a class TTL; " +
          'the class TTL applies only to answers that declare none (a class TTL of 0 still stores nothing). false: the class TTL replaces the upstream\'s max-age. ' +
          'no-store, private and no-cache answers are never stored either way.',
      },
    },
  },
  needs: () => ({ responseBody: true }),
  create(config, init) {
    const routeUpstream = init.route.upstream
    const pool = routeUpstream && init.upstreamNames.includes(routeUpstream) ? init.upstream(routeUpstream) : undefined
    const upstreamUrl = pool ? pool.config.url : ''
    const cacheName = config.pool ?? init.routeName
    const lookups = sharedCounter(init.metrics, 'tollgate_cache_lookups_total', 'response-cache lookups by route and result (hit, miss, coalesced).', ['route', 'result'])
    const evictions = sharedCounter(init.metrics, 'tollgate_cache_evictions_total', 'Entries response-cache evicted to stay within maxBytes, by cache (pool or route).', ['cache'])
    const [hits, misses, coalesced] = ['hit', 'miss', 'coalesced'].map((result) => lookups.labels(init.routeName, result))
    const coalescedRequests = coalescedCounter(init.metrics).labels(init.routeName)
    const maxEntryBytes = Math.min(config.maxEntryBytes ?? config.maxBytes, config.maxBytes)
    const { store, release } = acquireStore(`${config.pool ? 'pool' : 'route'}\n${cacheName}\n${config.maxBytes}\n${maxEntryBytes}`, {
      maxBytes: config.maxBytes,
      maxEntryBytes,
      onEvict: () => evictions.labels(cacheName).inc(),
    })
    // The upstream URL is part of every key: a reload that points the route elsewhere never serves the old answers.
    const keyPrefix = `${init.routeName}\n${upstreamUrl}\n`
    const cacheKey = (ctx: RequestContext) => {
      const query = ctx.upstreamQuery === undefined ? ctx.query : new URLSearchParams(ctx.upstreamQuery)
      const switched = ctx.upstream === routeUpstream ? '' : (ctx.upstream ?? '')
      return `${keyPrefix}${switched}\n${ctx.upstreamPath ?? ctx.path}\n${normaliseQuery(query)}`
    }
    const ttlCapMs = config.maxTtlSeconds * 1000
    /** How long a shareable 200 is kept: the upstream's own freshness or the class TTL (see followUpstream). */
    const keepSeconds = (headers: ResponseState['headers'], classTtl: unknown): number => {
      if (typeof classTtl !== 'number') return freshSeconds(headers, config.maxTtlSeconds)
      const declared = config.followUpstream && classTtl > 0 ? declaredSeconds(headers) : undefined
      return Math.min(declared ?? classTtl, config.maxTtlSeconds)
    }

    const serve = (ctx: RequestContext, answer: StoredAnswer) => {
      ctx.responseHeaders['x-cache'] = 'HIT'
      ctx.logFields.cache = 'hit'
      if (!config.chargeHits) ctx.state.set(CREDITS_REFUND, Number.MAX_SAFE_INTEGER)
      ctx.respond(answer.status, answer.body, answer.headers)
      // respond() copied the stored headers: the copy is this answer's own.
      ctx.response!.headers.age = ageOf(answer)
    }

    return {
      async request(ctx: RequestContext) {
        if (ctx.method !== 'GET') return
        const key = cacheKey(ctx)
        for (let waits = 0; ; waits++) {
          const hit = store.entries.get(key)
          if (hit) {
            hits.inc()
            return serve(ctx, hit)
          }
          const flight = config.coalesce && waits < MAX_WAITS ? store.flight(key) : undefined
          if (!flight) break
          const outcome = await waitFor(flight, ctx)
          if (outcome === undefined) throw new GatewayError(499, 'client_closed', 'the client closed the connection')
          if (outcome.kind === 'answer') {
            coalesced.inc()
            coalescedRequests.inc()
            if (pool) pool.coalesced++
            return serve(ctx, outcome.answer)
          }
          if (outcome.kind === 'error') throw outcome.error
          if (outcome.kind === 'bypass') waits = MAX_WAITS
        }
        misses.inc()
        ctx.responseHeaders['x-cache'] = 'MISS'
        ctx.logFields.cache = 'miss'
        // The key holds no request header: the body must not depend on one.
        ctx.upstreamHeaders['accept-encoding'] = 'identity'
        const state: MissState = { key, flight: config.coalesce && !store.flight(key) ? store.lead(key) : undefined }
        ctx.state.set(STATE, state)
      },
      response(ctx: RequestContext) {
        const state = ctx.state.get(STATE) as MissState | undefined
        if (!state) return
        ctx.state.delete(STATE)
        const response = ctx.response
        let answer: StoredAnswer | undefined
        if (response && !ctx.error && ctx.upstreamStatus !== undefined && isShareable(response.headers)) {
          answer = storedAnswer(response, state.key)
          const seconds = response.status !== 200 ? 0 : keepSeconds(response.headers, ctx.state.get(CACHE_TTL_STATE))
          if (seconds > 0) store.entries.set(state.key, answer, { ttl: Math.min(seconds * 1000, ttlCapMs) })
        }
        state.flight?.settle(outcomeOf(ctx, answer))
      },
      done(ctx: RequestContext) {
        // The response phase never ran (client gone): waiting followers start over.
        const state = ctx.state.get(STATE) as MissState | undefined
        state?.flight?.settle({ kind: 'retry' })
      },
      close() {
        release()
      },
    }
  },
}

export default responseCache
