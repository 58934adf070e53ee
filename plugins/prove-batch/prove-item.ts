/**
 * Sends one proof job of a batch to the proof server and turns the outcome into a result entry.
 * Every failure of the job (refusal, server error, timeout, dead upstream) becomes the entry's
 * error; only the client going away is thrown, since then no answer is wanted at all.
 */
import type { UpstreamHandle } from '../../core/proxy/plugin-api.ts'
import { upstreamFailure } from '../../core/proxy/plugin-api.ts'
import type { ItemError } from './items.ts'

export type ItemResult = { ok: true; proof: string } | { ok: false; error: ItemError }

export interface ProveJob {
  upstream: UpstreamHandle
  path: string
  payload: Buffer
  headers: Record<string, string>
  /** Aborts when the client goes away. */
  clientSignal: AbortSignal
  timeoutMs: number
  /** Largest proof accepted from the upstream. */
  maxResultBytes: number
}

/** Longest upstream error text quoted back (the proof server's are short: `bad input`). */
const MAX_ERROR_TEXT = 200

class ResultTooLarge extends Error {}

function upstreamError(status: number, text: string): ItemError {
  const message = text.trim().slice(0, MAX_ERROR_TEXT) || `proof server answered ${status}`
  if (status === 429) return { code: 'upstream_busy', message, status }
  if (status >= 400 && status < 500) return { code: 'proof_rejected', message, status }
  return { code: 'upstream_error', message, status: status >= 500 ? status : 502 }
}

/**
 * Runs one job; resolves with the result entry, rejects only when the client went away.
 *
 * @example
 * ```ts
 * const result = await proveOne({ upstream, path: '/prove', payload, headers: {}, clientSignal: ctx.signal, timeoutMs: 300000, maxResultBytes: 1 << 24 })
 * // { ok: true, proof: 'bWlkbmlnaHQ6...' }
 * ```
 */
export async function proveOne(job: ProveJob): Promise<ItemResult> {
  // A timer of our own, cleared when the job ends: AbortSignal.timeout would keep one pending per
  // job for the whole timeout (minutes), whatever happened to the job.
  const timeout = new AbortController()
  const timer = setTimeout(() => timeout.abort(), job.timeoutMs)
  const signal = AbortSignal.any([job.clientSignal, timeout.signal])
  try {
    const { statusCode, body } = await job.upstream.pool.request({
      path: job.upstream.basePath + job.path,
      method: 'POST',
      headers: { ...job.headers, 'content-type': 'application/octet-stream' },
      body: job.payload,
      signal,
    })
    const chunks: Buffer[] = []
    let size = 0
    const cap = statusCode === 200 ? job.maxResultBytes : 4096
    for await (const chunk of body) {
      size += chunk.length
      if (size > cap) {
        if (statusCode === 200) {
          body.destroy()
          throw new ResultTooLarge()
        }
        continue // keep draining an error body so the socket can be reused
      }
      chunks.push(chunk)
    }
    const bytes = Buffer.concat(chunks)
    if (statusCode === 200) return { ok: true, proof: bytes.toString('base64') }
    return { ok: false, error: upstreamError(statusCode, bytes.toString('utf8')) }
  } catch (error) {
    if (job.clientSignal.aborted) throw error
    if (error instanceof ResultTooLarge) {
      return { ok: false, error: { code: 'upstream_response_too_large', message: `proof exceeds ${job.maxResultBytes} bytes`, status: 502 } }
    }
    if (timeout.signal.aborted) {
      return { ok: false, error: { code: 'upstream_timeout', message: `proof did not finish within ${job.timeoutMs} ms`, status: 504 } }
    }
    const failure = upstreamFailure(error, job.upstream.name)
    return { ok: false, error: { code: failure.code, message: failure.message, status: failure.status } }
  } finally {
    clearTimeout(timer)
  }
}
