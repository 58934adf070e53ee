/** The per-request context shared by a route's plugins. */
import type { IncomingHttpHeaders } from 'node:http'
import type { ApiKeyRecord, Project } from '../projects/projects.ts'
import type { GatewayError } from './errors.ts'
import type { RequestContext, ResponseState } from './plugin.ts'

/** Told when the client goes away before its answer finished. */
export interface ClientAbortListener {
  clientAborted(): void
}

let sequence = 0
/** Slots made so far, in every module: each slot's index in a context's {@link Context.slotValues}. */
let slots = 0

/**
 * One typed value per request for the module that made the slot (made once, at module or `create`
 * time): what `ctx.state` holds, without the Map a request would make and hash into. A plugin whose
 * every request keeps a record (the credit meter) saves ~200 bytes and a few hundred instructions
 * per request (bench/RESULTS.md, session 13). `ctx.state` stays for values plugins share by name.
 *
 * @example
 * ```ts
 * const PAID = new RequestSlot<{ amount: number }>()
 * // request(ctx): PAID.set(ctx, { amount: 3 })   later: PAID.get(ctx)?.amount
 * ```
 */
export class RequestSlot<T> {
  readonly #index = slots++

  get(ctx: RequestContext): T | undefined {
    return (ctx as Context).slotValues?.[this.#index] as T | undefined
  }

  set(ctx: RequestContext, value: T): void {
    ;((ctx as Context).slotValues ??= new Array(slots))[this.#index] = value
  }
}
/** Credential headers of every request; a request's own set is made only when a plugin adds one. */
const DEFAULT_SECRET_HEADERS: ReadonlySet<string> = new Set(['x-api-key', 'x-api-secret'])
const NO_PARAMS: readonly string[] = []
const prefix = `${process.pid.toString(36)}-${Date.now().toString(36)}-`

export class Context implements RequestContext {
  readonly id: string
  readonly method: string
  path: string
  readonly #rawQuery: string
  #query?: URLSearchParams
  readonly headers: IncomingHttpHeaders
  readonly clientIp: string
  routeName = '-'
  params: Readonly<Record<string, string>> = {}
  /** The matched route's pattern segments (pipeline.ts): what {@link redactedPath} is built from. */
  routePattern: readonly string[] | undefined = undefined
  #redactedPath?: string
  project?: Project
  apiKey?: ApiKeyRecord
  refused?: { project?: Project; key?: ApiKeyRecord; reason: string }
  apiType?: string
  // The collections below are made on first use: most requests never touch them, and each one
  // allocated per request shows in the garbage collector's share at a few thousand requests/s.
  #secretParams?: Set<string>
  /** The route's credential params (its table's array, never written): read until a plugin asks for its own set. */
  #routeSecretParams: readonly string[] = NO_PARAMS
  #secretHeaders?: Set<string>
  #state?: Map<string, unknown>
  /** Values of {@link RequestSlot}s, by slot index; made by the first slot set on this request. */
  slotValues: unknown[] | undefined = undefined
  #logFields?: Record<string, unknown>
  body?: { raw: Buffer; json?: unknown }
  upstream?: string
  upstreamPath?: string
  upstreamQuery?: string
  upstreamMethod?: string
  upstreamHeaders: Record<string, string | null> = {}
  responseHeaders: Record<string, string> = {}
  response?: ResponseState
  upstreamStatus?: number
  error?: GatewayError
  truncated = false
  aborted = false
  #abort?: AbortController
  /** The first listener (the forwarder's, on nearly every request) in a field, further ones in an array made when needed. */
  #abortListener: ClientAbortListener | undefined = undefined
  #abortListeners?: ClientAbortListener[]
  readonly startedAt = performance.now()
  upstreamMs?: number
  /** Attempts sent upstream for this request (retries and hedges included; undefined when none). */
  upstreamAttempts?: number
  /** Label of the upstream target that gave the answer (a configured name or index, never a URL). */
  upstreamTarget?: string
  /** Body bytes of a streamed upstream answer written to the client so far (for the access line). */
  streamedBytes = 0
  /**
   * The header object made for this answer (by `respond` or the forwarder): the core may extend it in
   * place. Any other (a cache entry's, say) belongs to someone else and is copied.
   */
  ownHeaders: object | undefined = undefined
  /** The header object the forwarder made from the upstream's answer (its Set-Cookie is the route's to pass or drop). */
  upstreamAnswerHeaders: object | undefined = undefined
  /** Set when a plugin answered early: later phases up to `response` are skipped. */
  answered = false

  constructor(method: string, path: string, rawQuery: string, headers: IncomingHttpHeaders, clientIp: string, requestId?: string) {
    this.id = requestId ?? prefix + (++sequence).toString(36)
    this.method = method
    this.path = path
    this.#rawQuery = rawQuery
    this.headers = headers
    this.clientIp = clientIp
  }

  /**
   * The path with every credential param as `***`, for logs: built when read (the access line, a
   * plugin that logs), never on a request nobody logs, and from the credential params known at that
   * moment. Before a route matched: the path itself (no param of it is known to be a credential).
   */
  get redactedPath(): string {
    if (this.#redactedPath !== undefined) return this.#redactedPath
    return this.routePattern === undefined ? this.path : pathWithout(this.routePattern, this, '***')
  }

  set redactedPath(value: string) {
    this.#redactedPath = value
  }

  get secretParams(): Set<string> {
    return (this.#secretParams ??= new Set(this.#routeSecretParams))
  }

  /** The credential params the route's plugins declared at load: shared with every request of the route, not copied. */
  useRouteSecretParams(names: readonly string[]): void {
    if (this.#secretParams) for (const name of names) this.#secretParams.add(name)
    else this.#routeSecretParams = names
  }

  get secretHeaders(): Set<string> {
    return (this.#secretHeaders ??= new Set(DEFAULT_SECRET_HEADERS))
  }

  get state(): Map<string, unknown> {
    return (this.#state ??= new Map())
  }

  stateValue(key: string): unknown {
    return this.#state?.get(key)
  }

  get logFields(): Record<string, unknown> {
    return (this.#logFields ??= {})
  }

  /** {@link secretHeaders}`.has(name)`, without making the set. */
  isSecretHeader(name: string): boolean {
    return (this.#secretHeaders ?? DEFAULT_SECRET_HEADERS).has(name)
  }

  /** Whether any path param is a credential, without making the set. */
  get hasSecretParams(): boolean {
    return this.#secretParams !== undefined ? this.#secretParams.size > 0 : this.#routeSecretParams.length > 0
  }

  /** {@link secretParams}`.has(name)`, without making the set. */
  isSecretParam(name: string): boolean {
    return this.#secretParams !== undefined ? this.#secretParams.has(name) : this.#routeSecretParams.includes(name)
  }

  /** Log fields plugins added, if any (for the access line). */
  get addedLogFields(): Record<string, unknown> | undefined {
    return this.#logFields
  }

  /** Parsed on first use: most routes never read the query. */
  get query(): URLSearchParams {
    return (this.#query ??= new URLSearchParams(this.#rawQuery))
  }

  /** The query string as the client sent it, without `?`. */
  get rawQuery(): string {
    return this.#rawQuery
  }

  /** Created on first use: most requests never need one, and each costs on the hot path. */
  get signal(): AbortSignal {
    this.#abort ??= new AbortController()
    if (this.aborted) this.#abort.abort()
    return this.#abort.signal
  }

  /**
   * Cheap abort subscription for the core's own use (an object, not a closure: the forwarder
   * subscribes on every request). Called at once when the client is already gone.
   */
  onAbort(listener: ClientAbortListener): void {
    if (this.aborted) return listener.clientAborted()
    if (this.#abortListener === undefined) this.#abortListener = listener
    else (this.#abortListeners ??= []).push(listener)
  }

  offAbort(listener: ClientAbortListener): void {
    if (this.#abortListener === listener) {
      this.#abortListener = undefined
      return
    }
    const listeners = this.#abortListeners
    const i = listeners === undefined ? -1 : listeners.indexOf(listener)
    if (i !== -1) listeners!.splice(i, 1)
  }

  /** Marks the client as gone and tells everything waiting on it. */
  abortClient(): void {
    if (this.aborted) return
    this.aborted = true
    this.#abort?.abort()
    const first = this.#abortListener
    this.#abortListener = undefined
    first?.clientAborted()
    for (const listener of this.#abortListeners ?? []) listener.clientAborted()
  }

  respond(status: number, body: unknown, headers: Record<string, string> = {}): void {
    // Thrown here, in the plugin's step, the core answers 500 as for any plugin that throws; node
    // would refuse such a status only when the head is written, outside any plugin, and end the process.
    if (!Number.isInteger(status) || status < 100 || status > 999) throw new RangeError(`ctx.respond: status must be an integer from 100 to 999, got ${String(status)}`)
    const isBuffer = Buffer.isBuffer(body)
    const isText = typeof body === 'string'
    const payload = isBuffer ? body : Buffer.from(isText ? body : JSON.stringify(body))
    const contentType = isBuffer ? 'application/octet-stream' : isText ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8'
    const own: Record<string, string> = { 'content-type': contentType }
    for (const name in headers) own[name.toLowerCase()] = headers[name]
    this.response = { status, headers: own, body: payload }
    this.ownHeaders = own
    this.answered = true
  }
}

/** The path of `pattern` with credential params replaced (`***`, for logs) or removed (`''`, for upstreams). */
export function pathWithout(pattern: readonly string[], ctx: Context, replacement: string): string {
  let out = ''
  for (const part of pattern) {
    const first = part.charCodeAt(0)
    if (first !== 58 && first !== 42) out += '/' + part
    else {
      const name = part.slice(1)
      const value = ctx.params[name] ?? ''
      if (ctx.isSecretParam(name)) out += replacement ? '/' + replacement : ''
      else if (value !== '') out += '/' + value.split('/').map(encodeURIComponent).join('/')
    }
  }
  return out || '/'
}
