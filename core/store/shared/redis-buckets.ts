/**
 * Rate-limit token buckets in Redis, shared by every instance: one Lua script per decision (refill
 * from Redis's own clock, take, store, expire), so a decision is atomic and costs one round trip;
 * decisions issued in the same event-loop turn leave in one socket write (node-redis pipelines them).
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
import { errors, GatewayError } from '../../errors.ts'
import type { RateDecision } from '../types.ts'

const TAKE_SCRIPT = `
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 't', 'a')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = capacity
  at = now
else
  tokens = math.min(capacity, tokens + math.max(0, now - at) * rate / 1000)
  if now > at then at = now end
end
local allowed = 0
if cost <= capacity and tokens + 1e-9 >= cost then
  allowed = 1
  tokens = math.max(0, tokens - cost)
end
redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'a', string.format('%d', at))
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) * 1000 / rate) + 1000)
return {allowed, string.format('%.17g', tokens)}
`
const TAKE_SHA = createHash('sha1').update(TAKE_SCRIPT).digest('hex')

/** Tolerance for float drift, as in the in-process buckets (token-bucket.ts). */
const EPSILON = 1e-9

export interface RedisBucketsOptions {
  url: string
  /** Prefix of every key this store writes. */
  keyPrefix: string
  onError?: (error: Error) => void
}

/** Opens a client that fails fast while disconnected and reconnects with a capped backoff. */
export function openRedis(url: string, onError: (error: Error) => void) {
  const client = createClient({
    url,
    disableOfflineQueue: true,
    socket: {
      connectTimeout: 2000,
      reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, 1000),
    },
  })
  client.on('error', onError)
  return client
}

export type RedisClient = ReturnType<typeof openRedis>

export class RedisBuckets {
  readonly client: RedisClient
  private readonly prefix: string
  private connecting: Promise<unknown> | undefined

  constructor(options: RedisBucketsOptions) {
    this.prefix = `${options.keyPrefix}rate:`
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

  async take(key: string, capacity: number, refillPerSecond: number, cost = 1): Promise<RateDecision> {
    if (!(capacity > 0) || !Number.isFinite(capacity)) throw new RangeError(`capacity must be a positive number, got ${capacity}`)
    if (!(refillPerSecond > 0) || !Number.isFinite(refillPerSecond)) throw new RangeError(`refillPerSecond must be a positive number, got ${refillPerSecond}`)
    if (!(cost >= 0) || !Number.isFinite(cost)) throw new RangeError(`cost must be a non-negative number, got ${cost}`)
    const options = { keys: [this.prefix + key], arguments: [String(capacity), String(refillPerSecond), String(cost)] }
    let reply: unknown
    try {
      try {
        reply = await this.client.evalSha(TAKE_SHA, options)
      } catch (error) {
        if (!String((error as Error).message).startsWith('NOSCRIPT')) throw error
        reply = await this.client.eval(TAKE_SCRIPT, options)
      }
    } catch (error) {
      throw redisFailure(error)
    }
    const [allowedFlag, tokensText] = reply as [number, string]
    return decision(allowedFlag === 1, Number(tokensText), capacity, refillPerSecond, cost)
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
