/**
 * Upstream mode: verify, settle and supported go to another x402 facilitator (a named upstream of
 * gateway.yaml whose URL is the facilitator's base, e.g. `https://x402.org/facilitator` or another
 * tollgate's `.../x402/base/testnet/<key>`), at `<base>/verify`, `/settle` and `/supported`.
 *
 * The upstream's verdicts pass through (200, or 400 when it says the request is malformed and keeps
 * the `isValid` / `success` shape). Anything else it does (5xx, other 4xx, invalid JSON, no answer,
 * a timeout) is "x402 Payment request failed" (502); the cause is logged. Health asks `/supported`,
 * since the x402 specification defines no health endpoint.
 */
import { parseBoundedJson } from '../../core/proxy/plugin-api.ts'
import type { Logger } from 'pino'
import type { UpstreamHandle } from '../../core/proxy/plugin-api.ts'
import { resolveEvmNetwork } from './evm/chains.ts'
import { reasons } from './evm/errors.ts'
import { safeMessage } from './evm/reverts.ts'
import type { SettleResponse, VerifyResponse } from './evm/types.ts'
import type { Facilitator, FacilitatorAnswer } from './facilitator.ts'
import { paymentRequestFailed } from './failures.ts'

/** Verdicts and supported lists are small; anything larger is not a facilitator answer. */
const MAX_ANSWER_BYTES = 256 * 1024

type Shape = 'verify' | 'settle'

interface RawAnswer {
  status: number
  json: unknown
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The request must at least look like a facilitator request; the upstream judges the rest. */
function envelopeProblem(body: unknown): { field: string; message: string } | undefined {
  if (!isObject(body)) return { field: '(body)', message: 'body must be a JSON object' }
  const version = body.x402Version ?? (isObject(body.paymentPayload) ? body.paymentPayload.x402Version : undefined)
  if (version !== 1 && version !== 2) return { field: 'x402Version', message: `x402Version must be 1 or 2, got ${JSON.stringify(version) ?? 'nothing'}` }
  for (const field of ['paymentPayload', 'paymentRequirements'] as const) {
    if (!isObject(body[field])) return { field, message: `${field} is required and must be an object` }
  }
  return undefined
}

export class RemoteFacilitator implements Facilitator {
  readonly label: string
  readonly #upstream: UpstreamHandle
  readonly #log: Logger
  /** Network strings this path serves (v1 short name and CAIP-2), to narrow `supported`. */
  readonly #networks: Set<string> | undefined

  /**
   * @example
   * ```ts
   * const remote = new RemoteFacilitator('base/testnet', init.upstream('cdp-facilitator'), init.log, 84532)
   * const { status, body } = await remote.verify(requestBody, ctx.signal)
   * ```
   */
  constructor(label: string, upstream: UpstreamHandle, log: Logger, chainId?: number) {
    this.label = label
    this.#upstream = upstream
    this.#log = log
    const known = chainId === undefined ? undefined : resolveEvmNetwork(chainId)
    this.#networks = chainId === undefined ? undefined : new Set([`eip155:${chainId}`, ...(known ? [known.v1Name] : [])])
  }

  async ready(): Promise<void> {}

  async #call(method: 'GET' | 'POST', path: string, body: unknown, signal?: AbortSignal): Promise<RawAnswer> {
    const upstream = this.#upstream
    try {
      const response = await upstream.pool.request({
        path: upstream.basePath + path,
        method,
        headers: { accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
        // verify and supported change nothing: another target may answer them. settle moves money: sent once.
        retrySafe: !path.endsWith('settle'),
      })
      const chunks: Buffer[] = []
      let size = 0
      for await (const chunk of response.body) {
        size += chunk.length
        if (size > MAX_ANSWER_BYTES) {
          response.body.destroy()
          throw new Error(`answer larger than ${MAX_ANSWER_BYTES} bytes`)
        }
        chunks.push(chunk as Buffer)
      }
      const text = Buffer.concat(chunks, size).toString('utf8')
      let json: unknown
      try {
        // Bounded: the answer is walked and re-serialised for the client.
        json = parseBoundedJson(text)
      } catch {
        json = undefined
      }
      return { status: response.statusCode, json }
    } catch (error) {
      if (signal?.aborted) throw error
      this.#fail(path, `no answer: ${safeMessage(error)}`)
    }
  }

  #fail(path: string, cause: string): never {
    this.#log.warn({ network: this.label, upstream: this.#upstream.name, endpoint: path, cause }, 'x402 upstream facilitator failed')
    throw paymentRequestFailed()
  }

  async #verdict<T>(shape: Shape, body: unknown, signal?: AbortSignal): Promise<FacilitatorAnswer<T>> {
    const problem = envelopeProblem(body)
    if (problem) {
      const payer = ''
      const answer = shape === 'verify'
        ? { isValid: false, invalidReason: reasons.invalidPayload, invalidMessage: problem.message, payer, details: { field: problem.field } }
        : { success: false, errorReason: reasons.invalidPayload, errorMessage: problem.message, payer, transaction: '', network: '', details: { field: problem.field } }
      return { status: 400, body: answer as T }
    }
    const path = `/${shape}`
    const { status, json } = await this.#call('POST', path, body, signal)
    const flag = shape === 'verify' ? 'isValid' : 'success'
    const shaped = isObject(json) && typeof json[flag] === 'boolean'
    if (shaped && status >= 200 && status < 300) return { status: 200, body: json as T }
    if (shaped && status === 400) return { status: 400, body: json as T }
    this.#fail(path, `answered HTTP ${status}${shaped || json === undefined ? '' : ' without a verdict'}`)
  }

  verify(body: unknown, signal?: AbortSignal): Promise<FacilitatorAnswer<VerifyResponse>> {
    return this.#verdict<VerifyResponse>('verify', body, signal)
  }

  settle(body: unknown): Promise<FacilitatorAnswer<SettleResponse>> {
    return this.#verdict<SettleResponse>('settle', body)
  }

  async supported(signal?: AbortSignal): Promise<FacilitatorAnswer<unknown>> {
    const { status, json } = await this.#call('GET', '/supported', undefined, signal)
    if (status < 200 || status >= 300 || !isObject(json) || !Array.isArray(json.kinds)) {
      this.#fail('/supported', `answered HTTP ${status}${isObject(json) ? '' : ' without a kinds list'}`)
    }
    const networks = this.#networks
    if (!networks) return { status: 200, body: json }
    const kinds = json.kinds.filter((kind) => isObject(kind) && typeof kind.network === 'string' && networks.has(kind.network))
    return { status: 200, body: { ...json, kinds } }
  }

  async health(signal?: AbortSignal): Promise<{ ok: boolean; message?: string }> {
    try {
      await this.supported(signal)
      return { ok: true }
    } catch {
      return { ok: false, message: `${this.label} is unavailable: the upstream facilitator does not answer` }
    }
  }
}
