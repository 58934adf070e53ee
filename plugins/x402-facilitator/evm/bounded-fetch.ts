/**
 * A `fetch` for viem's HTTP transport whose deadline covers the whole exchange. viem's own
 * `timeout` bounds only the time to the response head: a chain RPC that answers `200,
 * content-length: 1000` and then sends nothing held `health`, verify and settle (and the credit
 * reservation of their request) for ever. This one reads the body before handing the response to
 * viem, under the same deadline and a size cap, so every chain read ends within `timeoutMs`.
 *
 * @example
 * ```ts
 * const transport = http(rpcUrl, { timeout: 10_000, fetchFn: boundedFetch(10_000) })
 * ```
 */
import { TimeoutError } from 'viem'

/** Largest chain RPC answer read (viem's own default cap is 10 MiB too). */
export const MAX_RPC_ANSWER_BYTES = 10 * 1024 * 1024

/** `base` is the fetch that does the exchange: the global one, or a pool's (rpc-pool.ts). */
export function boundedFetch(timeoutMs: number, maxBytes = MAX_RPC_ANSWER_BYTES, base: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const deadline = new AbortController()
    const timer = setTimeout(() => {
      const body = typeof init?.body === 'string' ? safeParse(init.body) : undefined
      deadline.abort(new TimeoutError({ body: body ?? {}, url: String(input instanceof Request ? input.url : input) }))
    }, timeoutMs)
    const signal = init?.signal ? AbortSignal.any([init.signal, deadline.signal]) : deadline.signal
    try {
      const response = await base(input, { ...init, signal })
      const body = await readCapped(response, maxBytes)
      return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers })
    } catch (error) {
      // The deadline's reason (a viem TimeoutError), not undici's generic abort error.
      if (deadline.signal.aborted) throw deadline.signal.reason
      throw error
    } finally {
      clearTimeout(timer)
    }
  }
}

async function readCapped(response: Response, maxBytes: number): Promise<Uint8Array | null> {
  if (!response.body) return null
  const chunks: Uint8Array[] = []
  let size = 0
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.length
    if (size > maxBytes) throw new Error(`chain RPC answered more than ${maxBytes} bytes`)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks, size)
}

function safeParse(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text)
    return typeof value === 'object' && value !== null ? value : undefined
  } catch {
    return undefined
  }
}
