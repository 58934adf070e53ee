/** The suite's HTTP client: one call, its outcome classified, never throwing. */
import { Agent, request } from 'undici'

export interface Outcome {
  /** Status of the head, or 0 when no head arrived. */
  status: number
  body: string
  /** The head arrived and the body ended as framed. */
  complete: boolean
  /** No answer (or no end of it) within the deadline. */
  hung: boolean
  /** Error code when the exchange failed (reset, closed, parse error). */
  error?: string
  ms: number
}

export interface CallOptions {
  method?: string
  headers?: Record<string, string>
  body?: string | Buffer
  /** Deadline for the head and again for the body. */
  deadlineMs?: number
  dispatcher?: Agent
}

export async function call(base: string, path: string, options: CallOptions = {}): Promise<Outcome> {
  const started = Date.now()
  const deadline = options.deadlineMs ?? 10000
  let status = 0
  try {
    const res = await request(base + path, {
      method: (options.method ?? 'GET') as any,
      headers: options.headers,
      body: options.body,
      headersTimeout: deadline,
      bodyTimeout: deadline,
      dispatcher: options.dispatcher,
    })
    status = res.statusCode
    const body = await res.body.text()
    return { status, body, complete: true, hung: false, ms: Date.now() - started }
  } catch (error) {
    const code = (error as { code?: string }).code ?? (error as Error).name
    const hung = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT'
    return { status, body: '', complete: false, hung, error: code, ms: Date.now() - started }
  }
}

/** Runs `tasks` with at most `width` at once. */
export async function inBatches<T>(tasks: (() => Promise<T>)[], width: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length)
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(width, tasks.length) }, async () => {
      while (next < tasks.length) {
        const index = next++
        results[index] = await tasks[index]()
      }
    }),
  )
  return results
}
