/**
 * Runs one request through its route: request → body → target → response → done.
 *
 * - Plugins run by priority within each phase; a plugin that answers (`ctx.respond`) or throws
 *   skips the remaining phases up to `response`.
 * - The body is read once, only when a plugin of the chain declared it needs it.
 * - `response` runs for every answer, errors included, before the head is written.
 * - `done` runs exactly once, after the answer finished or the client went away, and only after
 *   the chain itself has settled, so a plugin never sees `done` while it is still running.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Logger } from 'pino'
import { Context, pathWithout } from './context.ts'
import { errors, GatewayError, toGatewayError } from './errors.ts'
import { normalisePath, ROUTES_AT_PATH } from './router.ts'
import { isJsonMediaType, mediaType, parseJson, readBody, remainingMs } from './http/body.ts'
import { forward, type ForwardOptions } from './http/forward.ts'
import { endAtTurnEnd } from './http/turn-flush.ts'
import { headList, writeHeadKeeping, type HeadList } from './http/response-head.ts'
import { answerClosed, answerStarted } from './http/pending-answers.ts'
import type { UpstreamHandle } from './http/upstreams.ts'
import { safeMethod } from './upstream/retry-rules.ts'
import type { ProxyTrust } from './http/client-address.ts'
import type { CompiledRoute, Table } from './table.ts'
import { runSteps } from './steps.ts'
import { boundedUserAgent, bytesOut, causeOf } from './access-fields.ts'

export { MAX_LOGGED_USER_AGENT } from './access-fields.ts'
import type { CoreMetrics, RouteMetrics } from './metrics.ts'
import type { RequestContext } from './plugin.ts'

export interface PipelineDeps {
  log: Logger
  accessLog: boolean
  metrics: CoreMetrics
  unmatched: RouteMetrics
  upstreams: ReadonlyMap<string, UpstreamHandle>
  /** Which peers' X-Forwarded-* are believed, and so the client IP (http/client-address.ts). */
  trustProxy: ProxyTrust
  draining(): boolean
  /** Requests in flight in this process, read by the in-flight gauge when scraped. */
  inFlight: { count: number }
  /** Called when a retired table's last request is done. */
  tableIdle(table: Table): void
  /** Told every finished answer (the dashboard's tally of answers and refusals per project and key); must be cheap and not throw. */
  answered?(ctx: RequestContext, status: number): void
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

const EXCHANGE = Symbol('exchange')

/** One request's journey; a class so that the hot path creates no closures per request. */
class Exchange {
  route: CompiledRoute | undefined
  chainSettled = false
  closed = false
  doneRan = false
  /** The connection the request came on (node detaches it from the request once closed). */
  readonly socket: Socket

  constructor(
    readonly deps: PipelineDeps,
    readonly table: Table,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly ctx: Context,
  ) {
    this.socket = req.socket
  }

  async run(): Promise<void> {
    const { deps, table, req, res, ctx } = this
    // Every answer carries its request id, refusals before any route matched included.
    ctx.responseHeaders['x-request-id'] = ctx.id
    ctx.upstreamHeaders['x-request-id'] = ctx.id
    try {
      if (deps.draining()) {
        res.setHeader('connection', 'close')
        throw errors.shuttingDown('the gateway is shutting down')
      }
      const match = table.router.match(ctx.method, normalisePath(ctx.path))
      const route = (this.route = match.value)
      ctx.routeName = route.name
      ctx.params = match.params
      ctx.routePattern = route.pattern
      if (route.secretParams.length) ctx.useRouteSecretParams(route.secretParams)
      ctx.apiType = route.config.apiType
      ctx.upstream = route.config.upstream
      ctx.upstreamPath = route.rewrite ? route.rewrite(match.params) : ctx.path
      if (route.request.length) {
        const pending = runSteps(route.request, ctx)
        if (pending) await pending
      }
      // Without a rewrite the upstream would get the client's path: never with a credential in it.
      if (!route.rewrite && ctx.hasSecretParams && ctx.upstreamPath === ctx.path) ctx.upstreamPath = pathWithout(route.pattern, ctx, '')
      if (!ctx.answered && route.bodyNeed) {
        await readRequestBody(route, ctx, req)
        const pending = runSteps(route.body, ctx)
        if (pending) await pending
      }
      if (!ctx.answered) {
        await target(deps, route, ctx, req, res)
      }
    } catch (thrown) {
      ctx.error = toGatewayError(thrown)
      if (ctx.error.status >= 500 && !(thrown instanceof GatewayError)) {
        deps.log.error({ err: thrown, route: ctx.routeName, reqId: ctx.id }, 'unexpected error on the request path')
      }
    }
    try {
      if (!res.headersSent && !ctx.aborted) await answer(deps, table, this.route, ctx, res)
    } finally {
      this.chainSettled = true
      this.runDone()
    }
  }

  /** Called when the chain settled and when the answer closed: runs `done` after the second. Not async: without done plugins nothing waits, and no promise is made. */
  runDone(): void {
    if (this.doneRan || !this.chainSettled || !this.closed) return
    this.doneRan = true
    if (this.route?.done.length) this.runDonePlugins(0)
    else this.observed()
  }

  /**
   * Done steps in order, each after the previous settled. Synchronous while they return nothing (the
   * meter's done on the embedded engine): an await of each step's undefined was a promise and a
   * microtask turn per request. A step's promise is awaited by {@link awaitDoneStep}, which goes on.
   */
  runDonePlugins(from: number): void {
    const steps = this.route!.done
    for (let i = from; i < steps.length; i++) {
      let result: void | Promise<void>
      try {
        result = steps[i](this.ctx)
      } catch (error) {
        this.doneStepFailed(error)
        continue
      }
      if (result) {
        void this.awaitDoneStep(result, i)
        return
      }
    }
    this.observed()
  }

  async awaitDoneStep(pending: Promise<void>, at: number): Promise<void> {
    try {
      await pending
    } catch (error) {
      this.doneStepFailed(error)
    }
    this.runDonePlugins(at + 1)
  }

  doneStepFailed(error: unknown): void {
    const { deps, ctx } = this
    deps.log.error({ err: error, route: ctx.routeName, reqId: ctx.id }, 'a done-phase plugin threw')
  }

  observed(): void {
    const { deps, table } = this
    observe(deps, this.route, this.ctx, this.req, this.res)
    deps.inFlight.count--
    if (--table.inFlight === 0 && table.retired) deps.tableIdle(table)
  }
}

function onResponseClose(this: ServerResponse): void {
  const exchange = (this as unknown as { [EXCHANGE]: Exchange })[EXCHANGE]
  answerClosed(exchange.socket, exchange.req)
  if (!this.writableFinished) exchange.ctx.abortClient()
  exchange.closed = true
  exchange.runDone()
}

export function handleRequest(deps: PipelineDeps, table: Table, req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '/'
  const q = url.indexOf('?')
  const incomingId = req.headers['x-request-id']
  const ctx = new Context(
    req.method ?? 'GET',
    q === -1 ? url : url.slice(0, q),
    q === -1 ? '' : url.slice(q + 1),
    req.headers,
    deps.trustProxy.clientIp(req),
    typeof incomingId === 'string' && REQUEST_ID.test(incomingId) ? incomingId : undefined,
  )
  table.inFlight++
  deps.inFlight.count++
  const exchange = new Exchange(deps, table, req, res, ctx)
  ;(res as unknown as { [EXCHANGE]: Exchange })[EXCHANGE] = exchange
  answerStarted(req)
  // `on`, not `once`: a response closes once, and `once` wraps the listener in a closure per request.
  res.on('close', onResponseClose)
  void exchange.run()
}

async function readRequestBody(route: CompiledRoute, ctx: Context, req: IncomingMessage): Promise<void> {
  const type = mediaType(req.headers['content-type'])
  const json = route.bodyNeed === 'json'
  const accepted = route.contentTypes.length ? route.contentTypes.includes(type) : !json || isJsonMediaType(type)
  if (!accepted) {
    const expected = route.contentTypes.length ? route.contentTypes.join(' or ') : 'application/json'
    throw errors.unsupportedMediaType(`content-type must be ${expected}, got ${type || 'none'}`)
  }
  const raw = await readBody(req, route.maxBodyBytes, remainingMs(ctx.startedAt, route.bodyTimeoutMs), route.bodyTimeoutMs)
  ctx.body = json ? { raw, json: raw.length === 0 ? undefined : parseJson(raw) } : { raw }
}

/** Not async: a forwarded request's promise is the forwarder's own, awaited once by the caller (no second promise and hop per request). */
function target(deps: PipelineDeps, route: CompiledRoute, ctx: Context, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (route.handler) return handled(route, ctx)
  const upstream = deps.upstreams.get(ctx.upstream!)
  if (!upstream) throw errors.internal(`route ${route.name} names upstream ${ctx.upstream}, which does not exist`)
  let forwarding = route.forwarding
  if (forwarding === undefined || forwarding.safe.trustProxy !== deps.trustProxy) forwarding = route.forwarding = forwardingOf(deps, route)
  return forward(ctx, req, res, upstream, route.config.idempotent === true || safeMethod(ctx.upstreamMethod ?? ctx.method) ? forwarding.safe : forwarding.unsafe)
}

async function handled(route: CompiledRoute, ctx: Context): Promise<void> {
  await route.handler!.handle!(ctx)
  if (!ctx.response) throw errors.internal(`handler of route ${route.name} gave no answer`)
}

/** The forwarder's options depend on the route and the gateway only: made on the route's first forwarded request, not on each. */
function forwardingOf(deps: PipelineDeps, route: CompiledRoute): { safe: ForwardOptions; unsafe: ForwardOptions } {
  const options: ForwardOptions = {
    trustProxy: deps.trustProxy,
    credentials: route.credentials,
    maxBodyBytes: route.maxBodyBytes,
    bodyTimeoutMs: route.bodyTimeoutMs,
    bufferResponseUpTo: route.wantsResponseBody ? route.config.maxResponseBodyBytes : 0,
    retrySafe: true,
    commitHead: route.response.length ? commitHeadAfterPlugins : writeUpstreamHead,
  }
  return { safe: options, unsafe: { ...options, retrySafe: false } }
}

/**
 * Response steps, then the head. Not async: when the steps finish synchronously the head is written
 * at once and nothing is returned; otherwise one async function awaits them (an async wrapper
 * around an async runner was two promises and two awaits per request). A step's throw is returned
 * as a rejection, as the forwarder expects of a head it waits for.
 */
function commitHeadAfterPlugins(ctx: Context, res: ServerResponse): Promise<void> | undefined {
  const fromUpstream = ctx.response
  try {
    const pending = runSteps((res as unknown as { [EXCHANGE]: Exchange })[EXCHANGE].route!.response, ctx)
    if (pending) return headAfterSteps(pending, ctx, res, fromUpstream)
    // A head node refuses (a plugin's header value it will not send) is a rejection too, as before.
    headAfterPlugins(ctx, res, fromUpstream)
  } catch (error) {
    return Promise.reject(error)
  }
  return undefined
}

async function headAfterSteps(pending: Promise<void>, ctx: Context, res: ServerResponse, fromUpstream: Context['response']): Promise<void> {
  await pending
  headAfterPlugins(ctx, res, fromUpstream)
}

function headAfterPlugins(ctx: Context, res: ServerResponse, fromUpstream: Context['response']): void {
  // Still the upstream's own answer: its header object is this request's, extend it in place.
  if (ctx.response === fromUpstream) writeUpstreamHead(ctx, res)
  else writeHead(ctx, res)
}

/** Head of a streamed upstream answer: its headers, then the ones plugins added for the client. */
function writeUpstreamHead(ctx: Context, res: ServerResponse): void {
  const response = ctx.response!
  dropUpstreamSetCookie(ctx, res, response.headers)
  writeHeadKeeping(res, response.status, headList(response.headers, ctx.responseHeaders), (names) => headersRefused(ctx, res, names))
}

/** A plugin (or an upstream) gave a header node will not send: the answer goes without it. */
function headersRefused(ctx: Context, res: ServerResponse, names: string[]): void {
  const exchange = (res as unknown as { [EXCHANGE]: Exchange })[EXCHANGE]
  exchange.deps.log.error({ route: ctx.routeName, reqId: ctx.id, headers: names }, 'response headers node refuses to send were dropped')
}

/**
 * An upstream's Set-Cookie reaches the client only on a route that opts in (`passSetCookie`,
 * http/gateway-cookies.ts). Removed here, as the head is written, rather than by the forwarder:
 * response plugins still see it (a cache must not store an answer that set a cookie), and a
 * cookie a plugin adds for the client is not the upstream's.
 */
function dropUpstreamSetCookie(ctx: Context, res: ServerResponse, headers: Record<string, unknown>): void {
  if (headers !== ctx.upstreamAnswerHeaders || headers['set-cookie'] === undefined) return
  if (!(res as unknown as { [EXCHANGE]: Exchange })[EXCHANGE].route?.credentials.setCookie) delete headers['set-cookie']
}

/** Writes status and headers: the answer's own, then the ones plugins added for the client. */
function writeHead(ctx: Context, res: ServerResponse): void {
  const response = ctx.response!
  dropUpstreamSetCookie(ctx, res, response.headers)
  // A new list: the answer's header object may be shared (a cache entry) and is left as it is.
  const head = headList(response.headers, ctx.responseHeaders)
  if (response.body) setInList(head, 'content-length', String(response.body.length))
  writeHeadKeeping(res, response.status, head, (names) => headersRefused(ctx, res, names))
}

/** Sets `name` in a head list: its value replaced where the list has it (exact name, as an object key), else appended. */
function setInList(head: HeadList, name: string, value: string): void {
  for (let i = 0; i < head.length; i += 2) {
    if (head[i] === name) {
      head[i + 1] = value
      return
    }
  }
  head.push(name, value)
}

/** Sends an answer that is fully in memory: early replies, handler answers, buffered upstream bodies, errors. */
async function answer(deps: PipelineDeps, table: Table, route: CompiledRoute | undefined, ctx: Context, res: ServerResponse): Promise<void> {
  const sameMount = (ctx.error as { [ROUTES_AT_PATH]?: CompiledRoute[] } | undefined)?.[ROUTES_AT_PATH]
  const format = route?.errorFormat ?? sameMount?.[0]?.errorFormat ?? table.unmatchedFormat(ctx.path)
  if (ctx.error) {
    const rendered = format(ctx.error, ctx)
    ctx.response = { status: rendered.status, headers: rendered.headers, body: Buffer.from(rendered.body) }
  }
  if (route && ctx.response) {
    try {
      ctx.answered = false
      const pending = runSteps(route.response, ctx)
      if (pending) await pending
    } catch (thrown) {
      if (ctx.error) deps.log.error({ err: thrown, route: route.name, reqId: ctx.id }, 'a response-phase plugin threw while rendering an error')
      else {
        ctx.error = toGatewayError(thrown)
        const rendered = format(ctx.error, ctx)
        ctx.response = { status: rendered.status, headers: rendered.headers, body: Buffer.from(rendered.body) }
      }
    }
  }
  if (res.headersSent || ctx.aborted || !ctx.response) return
  writeHead(ctx, res)
  endAtTurnEnd(res, ctx.response.body)
}

function observe(deps: PipelineDeps, route: CompiledRoute | undefined, ctx: Context, req: IncomingMessage, res: ServerResponse): void {
  // An upstream failure after the head counts as that failure (502/504), not as the 200 it began as.
  const status = ctx.truncated ? ctx.error!.status : ctx.aborted && !res.headersSent ? 499 : (ctx.response?.status ?? res.statusCode)
  const seconds = (performance.now() - ctx.startedAt) / 1000
  const metrics = route?.metrics ?? deps.unmatched
  metrics.count(ctx.apiType, status)
  metrics.duration.observe(seconds)
  deps.answered?.(ctx, status)
  if (ctx.upstreamMs !== undefined) metrics.upstreamDuration.observe(ctx.upstreamMs / 1000)
  if (!deps.accessLog) return
  const log = deps.log
  // 4xx is the client's mistake (warn), 5xx the gateway's or the service's (error). Below the
  // logger's level (`log.level: warn` drops the 2xx lines) no field is formatted.
  const level = status >= 500 ? 'error' : status >= 400 ? 'warn' : 'info'
  if (!log.isLevelEnabled(level)) return
  log[level]({
    reqId: ctx.id,
    route: ctx.routeName,
    method: ctx.method,
    path: route ? ctx.redactedPath : '-',
    status,
    ip: ctx.clientIp,
    userAgent: boundedUserAgent(req.headers['user-agent']),
    project: ctx.project?.id,
    apiType: ctx.apiType,
    ms: Math.round(seconds * 1e6) / 1e3,
    upstreamMs: ctx.upstreamMs === undefined ? undefined : Math.round(ctx.upstreamMs * 1e3) / 1e3,
    upstreamTarget: ctx.upstreamTarget,
    attempts: ctx.upstreamAttempts !== undefined && ctx.upstreamAttempts > 1 ? ctx.upstreamAttempts : undefined,
    bytesIn: Number(req.headers['content-length'] ?? ctx.body?.raw.length ?? 0),
    bytesOut: bytesOut(ctx, res),
    error: ctx.error?.code,
    cause: status >= 500 ? causeOf(ctx.error) : undefined,
    sentStatus: ctx.truncated ? res.statusCode : undefined,
    truncated: ctx.truncated || undefined,
    aborted: (ctx.aborted && !ctx.truncated) || undefined,
    ...ctx.addedLogFields,
  })
}
