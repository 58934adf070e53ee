/**
 * Rate-limit token buckets in Redis, shared by every instance. The decisions asked for during one
 * event-loop turn leave together as ONE script call (EVALSHA with one key per decision; a key may
 * repeat): Redis runs it atomically, reads its own clock once, and takes from the buckets in the
 * order the decisions were asked, exactly as one call per decision would, so the limits stay exact
 * while the per-decision cost (command encoding, reply parsing, the client's per-command timeout
 * timer) is paid once per turn. A bucket taken several times in one call is read and written once.
 * One call is out at a time: decisions asked while it is out leave together when it answers, so under
 * load a call carries more decisions instead of more calls (fewer writes and reads per decision on
 * both sides); a call that fails or times out fails the decisions queued behind it too.
 *
 * Token leases: the first decision of a bucket in a call also takes up to `leaseTokens` more tokens
 * (an eighth of what Redis last said was left and no more than the bucket refills in 250 ms; none
 * below 2, so small or slow buckets are decided one decision at a time) if the bucket has them;
 * this instance then admits decisions from them without a call, for at most {@link TOKEN_LEASE_MS}.
 * Leased tokens left the bucket in Redis, so no instance can admit more than the bucket held: in any
 * window of `w` seconds all instances together admit at most `capacity + refillPerSecond × (w +
 * 0.25)`, and exactly as without leases once a bucket runs low (the last tokens are taken one
 * decision at a time). Unused leased tokens are dropped at expiry (never more than an eighth of
 * what was left). The `remaining` of a leased decision counts the instance's leased tokens as left.
 * The script is called by EVALSHA and loaded with EVAL when Redis answers NOSCRIPT (a restart or
 * SCRIPT FLUSH empties its cache).
 *
 * A bucket is a hash `{t: tokens, a: last refill ms}` that expires once it would be full again, so
 * a flushed or restarted Redis is the same as buckets that refilled: decisions start over from full.
 * Redis unreachable: {@link RedisBuckets.take} rejects with 503 `store_unavailable` at once (no
 * offline queue); the rate-limit plugin then applies its `onStoreError` (deny or allow).
 */
import { createHash } from 'node:crypto'
import { createClient } from 'redis'
import { errors, GatewayError } from '../../proxy/errors.ts'
import type { RateDecision } from '../types.ts'

// KEYS[i] is decision i's bucket; ARGV[4i-3..4i] its capacity, refill per second, cost and extra
// (tokens to lease on top of the cost when the bucket has them, else none). Returns {allowed_1,
// tokens_1, leased_1, allowed_2, ...}. Buckets seen before in the call are taken from
// the state in `seen`, and every bucket is written back once at the end, with the expiry the last
// decision on it gives (what the last of separate calls would have left).
const TAKE_SCRIPT = `
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local seen = {}
local order = {}
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local capacity = tonumber(ARGV[i * 4 - 3])
  local rate = tonumber(ARGV[i * 4 - 2])
  local cost = tonumber(ARGV[i * 4 - 1])
  local extra = tonumber(ARGV[i * 4])
  local b = seen[key]
  if b == nil then
    local state = redis.call('HMGET', key, 't', 'a')
    b = { tokens = tonumber(state[1]), at = tonumber(state[2]) }
    seen[key] = b
    order[#order + 1] = key
  end
  local tokens = b.tokens
  local at = b.at
  if tokens == nil or at == nil then
    tokens = capacity
    at = now
  else
    tokens = math.min(capacity, tokens + math.max(0, now - at) * rate / 1000)
    if now > at then at = now end
  end
  local allowed = 0
  local leased = 0
  if cost <= capacity and tokens + 1e-9 >= cost then
    allowed = 1
    tokens = math.max(0, tokens - cost)
    if extra > 0 and tokens >= extra then
      leased = extra
      tokens = tokens - extra
    end
  end
  b.tokens = tokens
  b.at = at
  b.capacity = capacity
  b.rate = rate
  out[i * 3 - 2] = allowed
  out[i * 3 - 1] = string.format('%.17g', tokens)
  out[i * 3] = leased
end
for _, key in ipairs(order) do
  local b = seen[key]
  redis.call('HSET', key, 't', string.format('%.17g', b.tokens), 'a', string.format('%d', b.at))
  redis.call('PEXPIRE', key, math.ceil((b.capacity - b.tokens) * 1000 / b.rate) + 1000)
end
return out
`
const TAKE_SHA = createHash('sha1').update(TAKE_SCRIPT).digest('hex')

/** Buckets whose lease or last answer this instance remembers; past this many it forgets them all. */
const MAX_LEASED_BUCKETS = 10_000

/** Most decisions in one script call (a turn with more sends several). */
export const MAX_TAKES_PER_CALL = 500

/** Tolerance for float drift, as in the in-process buckets (token-bucket.ts). */
const EPSILON = 1e-9

export interface RedisBucketsOptions {
  url: string
  /** Prefix of every key this store writes. */
  keyPrefix: string
  onError?: (error: Error) => void
  /** A script call unanswered this long fails its decisions (default {@link CALL_TIMEOUT_MS}). */
  callTimeoutMs?: number
  /** Most tokens leased per bucket at a time ({@link TOKEN_LEASE_MS}); 0 = every decision goes to Redis. Default 100. */
  leaseTokens?: number
}

/**
 * Leased tokens are spent within this long of leaving Redis, or dropped: a lease can only let
 * through tokens the bucket had, at most this much later than Redis would have.
 */
export const TOKEN_LEASE_MS = 250

/** Tokens of a bucket this instance took from Redis ahead of its decisions. */
interface TokenLease {
  tokens: number
  expiresAt: number
  /** The bucket's tokens in Redis after the lease left it. */
  redisTokens: number
  capacity: number
  refillPerSecond: number
}

/** A script call Redis has not answered in this long fails its decisions with `store_unavailable`. */
export const CALL_TIMEOUT_MS = 5000

/**
 * Opens a client that fails fast while disconnected and reconnects with a capped backoff. The
 * client's own per-command timeout is off: it arms an AbortSignal per command, which cost more than
 * the rest of a decision; the bucket calls keep one plain timer per call instead ({@link CALL_TIMEOUT_MS}).
 */
export function openRedis(url: string, onError: (error: Error) => void) {
  const client = createClient({
    url,
    disableOfflineQueue: true,
    commandOptions: { timeout: 0 },
    socket: {
      connectTimeout: 2000,
      // Capped at 200 ms: a refused connect on a local network costs next to nothing, and service
      // must be back within a second of Redis's return (test/reliability/chaos.test.ts).
      reconnectStrategy: (retries) => Math.min(25 * 2 ** retries, 200),
    },
  })
  client.on('error', onError)
  return client
}

export type RedisClient = ReturnType<typeof openRedis>

/** A decision waiting for its turn's script call. */
interface QueuedTake {
  /** The bucket's key as the caller named it (without {@link RedisBuckets}' key prefix). */
  key: string
  capacity: number
  refillPerSecond: number
  cost: number
  /** Tokens to lease with this decision (the first decision of its bucket in a call). */
  extra: number
  resolve(decision: RateDecision): void
  reject(error: unknown): void
}

export class RedisBuckets {
  readonly client: RedisClient
  private readonly prefix: string
  private connecting: Promise<unknown> | undefined
  private readonly callTimeoutMs: number
  private queue: QueuedTake[] = []
  private scheduled = false
  /** Script calls not answered yet: while one is out, decisions queue for the next (bigger) call. */
  private inFlight = 0
  /** Script calls made and decisions in them, since open. */
  private readonly counters = { calls: 0, takes: 0, leased: 0 }
  private readonly leaseTokens: number
  /** Per bucket key (the caller's, unprefixed): the tokens leased, or (tokens 0) what Redis last said was left, to size the next lease. */
  private readonly leases = new Map<string, TokenLease>()

  constructor(options: RedisBucketsOptions) {
    this.prefix = `${options.keyPrefix}rate:`
    this.callTimeoutMs = options.callTimeoutMs ?? CALL_TIMEOUT_MS
    this.leaseTokens = options.leaseTokens ?? 100
    this.client = openRedis(options.url, options.onError ?? (() => {}))
  }

  /** Connects, waiting at most `timeoutMs`; the client keeps trying in the background afterwards. */
  async connect(timeoutMs = 2000): Promise<boolean> {
    this.connecting ??= this.client.connect().catch(() => {})
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))
    await Promise.race([this.connecting, timeout])
    clearTimeout(timer)
    return this.client.isReady
  }

  /** Takes `cost` tokens from bucket `key`; resolves once the turn's script call has answered. */
  take(key: string, capacity: number, refillPerSecond: number, cost = 1): Promise<RateDecision> {
    if (!(capacity > 0) || !Number.isFinite(capacity)) return Promise.reject(new RangeError(`capacity must be a positive number, got ${capacity}`))
    if (!(refillPerSecond > 0) || !Number.isFinite(refillPerSecond)) return Promise.reject(new RangeError(`refillPerSecond must be a positive number, got ${refillPerSecond}`))
    if (!(cost >= 0) || !Number.isFinite(cost)) return Promise.reject(new RangeError(`cost must be a non-negative number, got ${cost}`))
    const leased = this.takeLeased(key, capacity, refillPerSecond, cost)
    if (leased !== undefined) return Promise.resolve(leased)
    return new Promise<RateDecision>((resolve, reject) => {
      this.queue.push({ key, capacity, refillPerSecond, cost, extra: 0, resolve, reject })
      this.schedule()
    })
  }

  /**
   * The decision when this instance's leased tokens of the bucket cover it (allowed), else undefined
   * (nothing taken; {@link take} asks Redis). Synchronous: the store's `quick.tryTakeToken`.
   */
  takeLeased(key: string, capacity: number, refillPerSecond: number, cost = 1): RateDecision | undefined {
    // Looked up by the caller's key, not the prefixed one: the rate-limit plugin passes the same
    // string object for a project on every request, whose hash V8 keeps, where a prefixed copy
    // would be built, flattened and hashed per decision (gateway CPU per request, issue 26).
    const lease = this.leases.get(key)
    // A bad capacity, refill or cost never matches a lease (take() refuses those before leasing).
    if (lease === undefined || !(lease.tokens >= cost && cost >= 0) || lease.capacity !== capacity || lease.refillPerSecond !== refillPerSecond) return undefined
    if (Date.now() >= lease.expiresAt) {
      lease.tokens = 0
      return undefined
    }
    lease.tokens -= cost
    this.counters.leased++
    return decision(true, lease.redisTokens + lease.tokens, capacity, refillPerSecond, cost)
  }

  /**
   * Tokens to lease with the first decision of a bucket in a call: an eighth of what Redis last said
   * was left, at most `leaseTokens` and at most what the bucket refills in {@link TOKEN_LEASE_MS}
   * (so tokens a lease drops unused are no more than the bucket gains meanwhile), none below 2: a
   * nearly empty or slowly refilled bucket decides one decision at a time, exactly.
   */
  private leaseSize(key: string, capacity: number, refillPerSecond: number): number {
    const last = this.leases.get(key)
    if (this.leaseTokens === 0 || last === undefined || last.capacity !== capacity || last.refillPerSecond !== refillPerSecond) return 0
    const size = Math.min(this.leaseTokens, Math.floor(last.redisTokens / 8), Math.floor((refillPerSecond * TOKEN_LEASE_MS) / 1000))
    return size >= 2 ? size : 0
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight > 0) return
    this.scheduled = true
    setImmediate(() => this.flush())
  }

  /** Script calls, the decisions they carried, and decisions taken from leased tokens since open (for tests and the bench). */
  stats(): { calls: number; takes: number; leased: number } {
    return { ...this.counters }
  }

  private flush(): void {
    this.scheduled = false
    const queued = this.queue
    this.queue = []
    const leasing = new Set<string>()
    for (const take of queued) {
      if (leasing.has(take.key)) continue
      leasing.add(take.key)
      take.extra = this.leaseSize(take.key, take.capacity, take.refillPerSecond)
    }
    for (let from = 0; from < queued.length; from += MAX_TAKES_PER_CALL) {
      this.inFlight++
      void this.send(queued.slice(from, from + MAX_TAKES_PER_CALL)).finally(() => {
        if (--this.inFlight === 0 && this.queue.length > 0) this.schedule()
      })
    }
  }

  private async send(batch: QueuedTake[]): Promise<void> {
    const keys = new Array<string>(batch.length)
    const args = new Array<string>(batch.length * 4)
    for (let i = 0; i < batch.length; i++) {
      const take = batch[i]!
      keys[i] = this.prefix + take.key
      args[i * 4] = String(take.capacity)
      args[i * 4 + 1] = String(take.refillPerSecond)
      args[i * 4 + 2] = String(take.cost)
      args[i * 4 + 3] = String(take.extra)
    }
    const options = { keys, arguments: args }
    let settled = false
    const fail = (error: unknown) => {
      if (settled) return
      settled = true
      const failure = redisFailure(error)
      for (const take of batch) take.reject(failure)
      // What queued behind a call Redis failed or left unanswered fails with it: its wait is
      // bounded by one call timeout, not by one per call queued ahead of it.
      const behind = this.queue
      this.queue = []
      for (const take of behind) take.reject(failure)
    }
    // A late answer is dropped: its decisions were already refused with store_unavailable.
    const timer = setTimeout(() => fail(new Error(`Redis did not answer within ${this.callTimeoutMs} ms`)), this.callTimeoutMs)
    let reply: unknown[]
    try {
      try {
        reply = (await this.client.evalSha(TAKE_SHA, options)) as unknown[]
      } catch (error) {
        if (!String((error as Error).message).startsWith('NOSCRIPT')) throw error
        reply = (await this.client.eval(TAKE_SCRIPT, options)) as unknown[]
      }
    } catch (error) {
      fail(error)
      return
    } finally {
      clearTimeout(timer)
    }
    if (settled) return
    settled = true
    this.counters.calls++
    this.counters.takes += batch.length
    const answeredAt = Date.now()
    for (let i = 0; i < batch.length; i++) {
      const take = batch[i]!
      const tokens = Number(reply[i * 3 + 1])
      const leased = Number(reply[i * 3 + 2])
      this.remember(take, tokens, leased, answeredAt)
      take.resolve(decision(reply[i * 3] === 1, tokens + leased, take.capacity, take.refillPerSecond, take.cost))
    }
  }

  /** Keeps what Redis said of a bucket: the tokens it leased (replacing an older lease's), and what it has left. */
  private remember(take: QueuedTake, redisTokens: number, leased: number, at: number): void {
    const lease = this.leases.get(take.key)
    if (lease === undefined) {
      if (this.leases.size >= MAX_LEASED_BUCKETS) this.leases.clear()
      this.leases.set(take.key, { tokens: leased, expiresAt: at + TOKEN_LEASE_MS, redisTokens, capacity: take.capacity, refillPerSecond: take.refillPerSecond })
      return
    }
    lease.redisTokens = redisTokens
    lease.capacity = take.capacity
    lease.refillPerSecond = take.refillPerSecond
    if (take.extra > 0) {
      // A new lease replaces what is left of the older one (fewer tokens than a decision needed):
      // every leased token is spent within TOKEN_LEASE_MS of leaving Redis.
      lease.tokens = leased
      lease.expiresAt = at + TOKEN_LEASE_MS
    }
  }

  async ping(timeoutMs: number): Promise<string> {
    if (!this.client.isReady) return 'disconnected'
    let timer: NodeJS.Timeout | undefined
    try {
      const answer = await Promise.race([this.client.ping(), new Promise<string>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)))])
      return answer === 'PONG' ? 'ok' : String(answer)
    } catch (error) {
      return (error as Error).message
    } finally {
      clearTimeout(timer)
    }
  }

  async close(): Promise<void> {
    if (this.client.isOpen) await this.client.close().catch(() => this.client.destroy())
    else this.client.destroy()
  }
}

function redisFailure(error: unknown): Error {
  if (error instanceof GatewayError) return error
  return errors.storeUnavailable('the rate-limit store (Redis) cannot be reached', { cause: error })
}

/** The decision's numbers, computed like the in-process buckets from the tokens left after the take. */
function decision(allowed: boolean, tokens: number, capacity: number, refillPerSecond: number, cost: number): RateDecision {
  const resetSeconds = secondsFor(capacity - tokens, refillPerSecond)
  let retryAfterSeconds = 0
  if (!allowed) retryAfterSeconds = cost <= capacity ? Math.max(1, secondsFor(cost - tokens, refillPerSecond)) : Math.max(1, resetSeconds)
  return { allowed, limit: capacity, remaining: Math.floor(tokens + EPSILON), resetSeconds, retryAfterSeconds }
}

function secondsFor(tokens: number, refillPerSecond: number): number {
  if (tokens <= EPSILON) return 0
  return Math.ceil(tokens / refillPerSecond - EPSILON)
}
