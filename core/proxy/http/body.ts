/**
 * Reads a request body once, counting bytes as they stream. A body past the cap answers 413
 * whether or not it announced a Content-Length, so chunked bodies cannot slip past the limit.
 */
import type { IncomingMessage } from 'node:http'
import { errors, GatewayError } from '../errors.ts'
import { parseBoundedJson, type JsonTextError } from '../json.ts'

/**
 * The 408 of a body not received by its route's deadline. The rest of the body is never read, so
 * the connection closes after the answer.
 */
export function bodyTimedOut(timeoutMs: number) {
  return errors.requestTimeout(`the request body was not received within ${timeoutMs} ms`, { headers: { connection: 'close' } })
}

/** Milliseconds left of a body deadline counted from `startedAt` (performance.now()); undefined when there is none. */
export function remainingMs(startedAt: number, timeoutMs: number): number | undefined {
  return timeoutMs > 0 ? Math.max(1, timeoutMs - (performance.now() - startedAt)) : undefined
}

/**
 * Reads the whole body, up to `maxBytes` (413 past it) and within `timeoutMs` of now when given
 * (408 past it).
 */
export function readBody(req: IncomingMessage, maxBytes: number, timeoutMs?: number, deadlineMs = timeoutMs): Promise<Buffer> {
  const declared = req.headers['content-length']
  if (declared !== undefined && Number(declared) > maxBytes) {
    return Promise.reject(errors.bodyTooLarge(`request body of ${declared} bytes exceeds the limit of ${maxBytes} bytes`))
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let received = 0
    const onData = (chunk: Buffer) => {
      received += chunk.length
      if (received > maxBytes) {
        cleanup()
        discardRest(req, maxBytes)
        reject(errors.bodyTooLarge(`request body exceeds the limit of ${maxBytes} bytes`))
        return
      }
      chunks.push(chunk)
    }
    const onEnd = () => {
      cleanup()
      resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received))
    }
    const onError = (error: Error) => {
      cleanup()
      reject(errors.badPath(`request body could not be read: ${error.message}`))
    }
    const onAborted = () => {
      cleanup()
      reject(errors.badPath('client closed the connection while sending the body'))
    }
    // A body the parser already has whole needs no deadline (most small bodies arrive with their head).
    const timer = timeoutMs === undefined || req.complete ? undefined : setTimeout(() => {
      cleanup()
      req.pause()
      reject(bodyTimedOut(deadlineMs ?? timeoutMs))
    }, timeoutMs)
    const cleanup = () => {
      clearTimeout(timer)
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('close', onClose)
    }
    const onClose = () => {
      if (!req.complete) onAborted()
    }
    req.on('data', onData)
    req.on('end', onEnd)
    req.on('error', onError)
    req.on('close', onClose)
  })
}

/**
 * Reads and drops the rest of a refused body, like nginx's lingering close, so the client can read
 * the 413 and reuse the connection. A client that keeps sending far past the cap loses the socket.
 */
function discardRest(req: IncomingMessage, maxBytes: number): void {
  const budget = Math.max(1 << 20, maxBytes * 4)
  let discarded = 0
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length
    if (discarded > budget) req.socket.destroy()
  })
  req.resume()
}

/** The media type without parameters, lower-cased: `application/json; charset=utf-8` → `application/json`. */
export function mediaType(header: string | undefined): string {
  if (!header) return ''
  const semicolon = header.indexOf(';')
  return (semicolon === -1 ? header : header.slice(0, semicolon)).trim().toLowerCase()
}

/** True for `application/json` and `application/<x>+json`. */
export function isJsonMediaType(type: string): boolean {
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))
}

/** Parses a request body; invalid JSON, or nesting past `MAX_JSON_DEPTH` (core/proxy/json.ts), answers 400 `invalid_json`. */
export function parseJson(raw: Buffer): unknown {
  try {
    return parseBoundedJson(raw)
  } catch (error) {
    const why = (error as JsonTextError).tooDeep ? `request body ${(error as Error).message}` : `request body is not valid JSON: ${(error as Error).message}`
    throw errors.invalidJson(why)
  }
}

/**
 * Refuses a field of a JSON body object that is not in `allowed`: 400 `invalid_body` naming it (cut
 * to 64 characters) and the allowed ones.
 *
 * @example
 * ```ts
 * refuseUnknownFields(request, ['amount', 'reason']) // {amount: 1, note: 'x'} → "unknown field note; allowed: amount, reason"
 * ```
 */
export function refuseUnknownFields(request: Record<string, unknown>, allowed: readonly string[]): void {
  for (const name of Object.keys(request)) {
    if (!allowed.includes(name)) throw new GatewayError(400, 'invalid_body', `unknown field ${name.slice(0, 64)}; allowed: ${allowed.join(', ')}`)
  }
}
