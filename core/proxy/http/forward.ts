/**
 * Forwards one request to an upstream pool with undici's dispatch API (the fastest path measured
 * on Node 20: no stream.pipeline, no per-request AbortController of our own).
 *
 * Bodies stream both ways unless a plugin asked for the response body, in which case it is
 * buffered up to a cap. Credentials never go upstream: secret headers are dropped, and the path
 * sent is the route's rewrite, which never contains a credential param. The client's
 * `Authorization` and the gateway's own cookies stay here, and an upstream's `Set-Cookie` never
 * reaches the client, unless the route opts in (gateway-cookies.ts says why).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Dispatcher } from 'undici'
import { errors, GatewayError } from '../errors.ts'
import type { Context } from '../context.ts'
import { corkUntilTurnEnd } from './turn-flush.ts'
import { bodyTimedOut, remainingMs } from './body.ts'
import type { UpstreamHandle } from './upstreams.ts'
import { Attempt, type AttemptControl, type AttemptOwner } from './forward-attempt.ts'
import { retryableError, retryableStatus } from '../upstream/retry-rules.ts'
import type { Target } from '../upstream/target.ts'
import { THROTTLED } from '../upstream/choose.ts'
import type { UpstreamCredentialPolicy } from './gateway-cookies.ts'
import type { ProxyTrust } from './client-address.ts'
import { upstreamRequestHeaders, upstreamResponseHeaders } from './forward-headers.ts'

const BODY_TOO_LARGE = Symbol('body-too-large')
/** Body bytes held while the response plugins decide the head, before the upstream is paused. */
const HOLD_BEFORE_PAUSE = 64 * 1024

export interface ForwardOptions {
  /** Whether the peer's X-Forwarded-* are believed (and passed on). */
  trustProxy: ProxyTrust
  /** The route's opt-ins for the client's credentials (computed once at table build). */
  credentials: UpstreamCredentialPolicy
  maxBodyBytes: number
  /** Deadline for the client's body, counted from the request head (408 past it); 0 = none. */
  bodyTimeoutMs: number
  /** Buffer the upstream body (for response-body plugins) up to this many bytes; 0 = stream. */
  bufferResponseUpTo: number
  /** The request may be sent again (GET/HEAD or a route marked idempotent); retried and hedged only then. */
  retrySafe: boolean
  /** Runs the response phase and sends the head; a promise means: wait for it before the body. */
  commitHead(ctx: Context, res: ServerResponse): void | Promise<void>
}

/** Maps a transport failure to the gateway's stable codes. */
export function upstreamFailure(error: unknown, upstream: string): GatewayError {
  if (error instanceof GatewayError) return error
  const code = (error as { code?: string })?.code ?? ''
  if ((error as any)?.[BODY_TOO_LARGE]) return (error as any)[BODY_TOO_LARGE]
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return errors.upstreamTimeout(`upstream ${upstream} did not accept the connection in time`, { cause: error })
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return errors.upstreamTimeout(`upstream ${upstream} did not answer in time`, { cause: error })
  if (code === 'UND_ERR_BODY_TIMEOUT') return errors.upstreamTimeout(`upstream ${upstream} stalled while sending its body`, { cause: error })
  return errors.upstreamUnavailable(`upstream ${upstream} is unavailable`, { cause: error })
}

/** Streams the client's body upstream, enforcing the cap even without a Content-Length. */
function streamedBody(req: IncomingMessage, maxBytes: number): IncomingMessage | AsyncIterable<Buffer> | undefined {
  const length = req.headers['content-length']
  const chunked = req.headers['transfer-encoding'] !== undefined
  if (!chunked && (length === undefined || length === '0')) return undefined
  if (length !== undefined && Number(length) > maxBytes) {
    throw errors.bodyTooLarge(`request body of ${length} bytes exceeds the limit of ${maxBytes} bytes`)
  }
  // With a Content-Length, node's parser already bounds the body; only chunked bodies need counting.
  return chunked ? countedBody(req, maxBytes) : req
}

async function* countedBody(req: IncomingMessage, maxBytes: number): AsyncIterable<Buffer> {
  let received = 0
  for await (const chunk of req) {
    received += (chunk as Buffer).length
    if (received > maxBytes) {
      throw Object.assign(new Error('body too large'), {
        [BODY_TOO_LARGE]: errors.bodyTooLarge(`request body exceeds the limit of ${maxBytes} bytes`),
      })
    }
    yield chunk as Buffer
  }
}

/**
 * The dispatch handler of one forwarded request. A class rather than an object of closures: the
 * hot path allocates one object per request and no functions.
 */
class ForwardHandler implements AttemptOwner {
  headSent = false
  settled = false
  chunks: Buffer[] = []
  buffered = 0
  /** The response plugins are still deciding the head: body chunks wait in `chunks`. */
  headPending = false
  /** The upstream was paused because too much body waited for the head. */
  pausedForHead = false
  /** The upstream body ended while the head was pending. */
  endedBeforeHead = false
  /** The attempt that won, once it did: what pauses, resumes and aborts the answer's body. */
  controller: AttemptControl | undefined
  bodyTimer: NodeJS.Timeout | undefined
  resolve: () => void = noop
  reject: (error: unknown) => void = noop
  readonly started = performance.now()
  /** The attempt whose answer the client gets; until then, `live` are racing (a hedge) or one is waiting. */
  winner: Attempt | undefined = undefined
  live: Attempt[] = []
  retries = 0
  hedgeTimer: NodeJS.Timeout | undefined
  /** Set when the request may be sent again (safe, and its body is in memory or absent). */
  dispatchOptions: Dispatcher.DispatchOptions | undefined
  relativePath = ''

  constructor(
    readonly ctx: Context,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly upstream: UpstreamHandle,
    readonly options: ForwardOptions,
  ) {}

  clientAborted(): void {
    const error = errors.upstreamUnavailable('client closed the connection')
    if (this.controller) return this.controller.abort(error)
    this.stopAttempts(error)
    this.finish(error)
  }

  stopAttempts(reason: Error): void {
    for (const attempt of this.live) attempt.cancel(reason)
    this.live = []
  }

  /** Sends one attempt to the best target other than `exclude` (when another can take it). */
  launch(exclude: Target | undefined, kind: 'first' | 'retry' | 'hedge' = 'first'): void {
    const target = this.upstream.choose(exclude)
    if (kind === 'hedge' && (target === undefined || target === THROTTLED)) return
    if (target === THROTTLED) return this.finish(this.upstream.throttledError())
    if (!target) return this.finish(errors.upstreamUnavailable(`upstream ${this.upstream.name} is overloaded`))
    if (kind !== 'first') target.counters[kind === 'retry' ? 'retries' : 'hedges']++
    const attempt = new Attempt(this, target)
    this.live.push(attempt)
    this.ctx.upstreamAttempts = (this.ctx.upstreamAttempts ?? 0) + 1
    const base = this.dispatchOptions!
    // The prepared options name the first target; another gets its own origin and path prefix.
    const options = target === this.upstream.targets[0] ? base : { ...base, origin: target.origin, path: target.basePath + this.relativePath }
    try {
      target.pool.dispatch(options, attempt)
    } catch (error) {
      attempt.onError(error as Error)
    }
  }

  /** A retry when the rules allow it: safe request, attempts left, and the upstream's budget agrees. */
  mayRetry(): boolean {
    if (!this.options.retrySafe || this.dispatchOptions === undefined || this.ctx.aborted) return false
    if (this.retries >= this.upstream.config.retry.maxRetries) return false
    return this.upstream.budget.take(Date.now())
  }

  discardHead(attempt: Attempt, status: number): boolean {
    if (!retryableStatus(status) || !this.options.retrySafe || this.dispatchOptions === undefined) return false
    // A hedge still racing may answer instead; else a retry must be allowed now.
    return this.live.length > 1 || this.mayRetry()
  }

  attemptFailed(attempt: Attempt, error: unknown): void {
    this.live = this.live.filter((a) => a !== attempt)
    if (this.settled || this.live.length > 0) return
    // A discarded answer (error undefined) already had its retry allowed.
    if (error === undefined || (retryableError(error) && this.mayRetry())) {
      this.retries++
      return this.launch(attempt.target, 'retry')
    }
    this.finish(error)
  }

  /** No head after the hedge threshold: the same request also goes to another target; the first head wins. */
  hedge(): void {
    this.hedgeTimer = undefined
    if (this.settled || this.winner || this.live.length !== 1 || this.ctx.aborted) return
    const first = this.live[0].target
    // Only to another target: a pool of one (or one whose others are all out) is not hedged.
    if (this.upstream.targets.length === 1 || !this.upstream.budget.take(Date.now())) return
    this.launch(first, 'hedge')
  }

  won(attempt: Attempt, status: number, rawHeaders: Buffer[]): void {
    this.winner = attempt
    this.controller = attempt
    this.ctx.upstreamTarget = attempt.target.name
    if (this.hedgeTimer) clearTimeout(this.hedgeTimer)
    // The loser runs on unseen (forward-attempt.ts says why).
    if (this.live.length > 1) for (const other of this.live) if (other !== attempt) other.abandon()
    // Emptied in place: one array less per request (the common case is a single attempt).
    this.live.length = 0
    this.onResponseStart(attempt, status, rawHeaders)
  }

  /** A streamed client body not received by the route's deadline: the exchange ends with 408. */
  bodyTimedOut(): void {
    this.bodyTimer = undefined
    if (this.req.complete || this.settled) return
    const error = bodyTimedOut(this.options.bodyTimeoutMs)
    if (this.controller) return this.controller.abort(error)
    this.stopAttempts(error)
    this.finish(error)
  }

  finish(error?: unknown): void {
    if (this.settled) return
    this.settled = true
    if (this.bodyTimer) clearTimeout(this.bodyTimer)
    if (this.hedgeTimer) clearTimeout(this.hedgeTimer)
    if (this.live.length) this.stopAttempts(errors.upstreamUnavailable('request over'))
    this.ctx.upstreamMs = performance.now() - this.started
    this.ctx.offAbort(this)
    if (error === undefined) return this.resolve()
    if (this.headSent) {
      // Too late for an error answer: cut the connection so the client sees a truncated body.
      // The error is recorded before the cut (which marks the client gone), so the ledger and the
      // access line see a failure of the service; a failure caused by the client leaving is not
      // one: the client's own abort keeps the answer as it was decided.
      if (!this.ctx.aborted) {
        this.ctx.error = upstreamFailure(error, this.upstream.name)
        this.ctx.truncated = true
      }
      this.res.destroy()
      return this.resolve()
    }
    this.reject(upstreamFailure(error, this.upstream.name))
  }

  onResponseStart(controller: AttemptControl, statusCode: number, rawHeaders: Buffer[]): void {
    const ctx = this.ctx
    ctx.upstreamStatus = statusCode
    const own = upstreamResponseHeaders(rawHeaders)
    ctx.response = { status: statusCode, headers: own }
    ctx.ownHeaders = own
    ctx.upstreamAnswerHeaders = own
    if (this.options.bufferResponseUpTo > 0) return
    const committing = this.options.commitHead(ctx, this.res)
    if (!committing) {
      this.headSent = true
      return
    }
    // The body is held rather than the upstream paused: a small answer usually arrives whole with
    // its head, and pausing/resuming the parser for it costs more than keeping its bytes.
    this.headPending = true
    void this.sendAfterHead(committing, controller)
  }

  /** Sends what the body held once the head is decided; a refused head aborts the upstream. */
  async sendAfterHead(committing: Promise<void>, controller: AttemptControl): Promise<void> {
    try {
      await committing
    } catch (error) {
      this.headPending = false
      this.chunks = []
      if (this.endedBeforeHead) return this.finish(error)
      return controller.abort(error as Error)
    }
    // The upstream failed meanwhile (timeout, reset, client gone): the core answers that instead.
    if (this.settled) return
    this.headPending = false
    this.headSent = true
    const held = this.chunks
    this.chunks = []
    this.ctx.streamedBytes += this.buffered
    // No cork here: this runs once the head's promise settled, which for the meter is the check
    // phase already, after the turn's group commit; a cork would hold the answer one turn more.
    if (this.endedBeforeHead) {
      this.res.end(held.length === 1 ? held[0] : Buffer.concat(held, this.buffered))
      return this.finish()
    }
    for (const chunk of held) this.res.write(chunk)
    this.buffered = 0
    if (this.pausedForHead) controller.resume()
  }

  onResponseData(controller: AttemptControl, chunk: Buffer): void {
    if (this.headPending) {
      this.chunks.push(chunk)
      this.buffered += chunk.length
      if (this.buffered > HOLD_BEFORE_PAUSE && !this.pausedForHead) {
        this.pausedForHead = true
        controller.pause()
      }
      return
    }
    const cap = this.options.bufferResponseUpTo
    if (cap > 0) {
      this.buffered += chunk.length
      if (this.buffered > cap) {
        controller.abort(errors.responseTooLarge(`upstream ${this.upstream.name} answered more than ${cap} bytes`))
        return
      }
      this.chunks.push(chunk)
      return
    }
    this.ctx.streamedBytes += chunk.length
    corkUntilTurnEnd(this.res)
    if (!this.res.write(chunk)) {
      controller.pause()
      this.res.once('drain', () => controller.resume())
    }
  }

  onResponseEnd(): void {
    if (this.headPending) {
      this.endedBeforeHead = true
      return
    }
    if (this.options.bufferResponseUpTo > 0) {
      this.ctx.response!.body = Buffer.concat(this.chunks, this.buffered)
      return this.finish()
    }
    corkUntilTurnEnd(this.res)
    this.res.end()
    this.finish()
  }

  onResponseError(error: Error): void {
    this.finish(error)
  }
}

function noop(): void {}

/** Where the one executor of the forwarder's promises leaves its settling functions (no executor closure per request). */
const settlers: { resolve: () => void; reject: (error: unknown) => void } = { resolve: noop, reject: noop }

function captureSettlers(resolve: () => void, reject: (error: unknown) => void): void {
  settlers.resolve = resolve
  settlers.reject = reject
}

function onBodyDeadline(handler: ForwardHandler): void {
  handler.bodyTimedOut()
}

function onHedgeDeadline(handler: ForwardHandler): void {
  handler.hedge()
}

export function forward(ctx: Context, req: IncomingMessage, res: ServerResponse, upstream: UpstreamHandle, options: ForwardOptions): Promise<void> {
  const query = ctx.upstreamQuery ?? ctx.rawQuery
  const relative = (ctx.upstreamPath ?? ctx.path) + (query ? `?${query}` : '')
  const path = upstream.basePath + relative
  const body = ctx.body ? ctx.body.raw : streamedBody(req, options.maxBodyBytes)
  const dispatchOptions: Dispatcher.DispatchOptions = {
    origin: upstream.origin,
    path,
    method: (ctx.upstreamMethod ?? ctx.method) as Dispatcher.HttpMethod,
    headers: upstreamRequestHeaders(ctx, req, options.trustProxy, options.credentials),
    // undici accepts async iterables as bodies; its typings only list streams and buffers.
    body: (body ?? null) as Dispatcher.DispatchOptions['body'],
  }
  const handler = new ForwardHandler(ctx, req, res, upstream, options)
  handler.dispatchOptions = dispatchOptions
  handler.relativePath = relative
  // The budget counts requests only where a second attempt can happen.
  if (!upstream.plain) upstream.budget.request(Date.now())
  // A streamed body still arriving gets the route's deadline; one read by the core already had it.
  if (body === req || (body !== undefined && !ctx.body)) {
    const left = remainingMs(ctx.startedAt, options.bodyTimeoutMs)
    if (left !== undefined && !req.complete) handler.bodyTimer = setTimeout(onBodyDeadline, left, handler)
  }
  const done = new Promise<void>(captureSettlers)
  handler.resolve = settlers.resolve
  handler.reject = settlers.reject
  ctx.onAbort(handler)
  if (ctx.aborted) handler.clientAborted()
  else handler.launch(undefined)
  // A streamed body cannot be sent twice: such a request gets one attempt.
  if (body !== undefined && !ctx.body) handler.dispatchOptions = undefined
  else if (options.retrySafe && upstream.hedges && !handler.settled) {
    const after = upstream.hedgeAfterMs()
    if (after > 0) handler.hedgeTimer = setTimeout(onHedgeDeadline, after, handler)
  }
  return done
}
