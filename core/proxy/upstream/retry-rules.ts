/**
 * What may be sent again. A second attempt is safe only when the first cannot have changed anything
 * the client pays for or relies on: the request is a read (GET/HEAD, a read-only JSON-RPC call, a
 * mirror read, x402 `verify`) or its route says it is idempotent, its body can be replayed, and the
 * failure happened before any byte of the answer reached the client.
 */

/** Statuses after which a safe request goes to another target (the answer is discarded). */
export function retryableStatus(status: number): boolean {
  return status === 502 || status === 503 || status === 504 || status === 429
}

/** Transport failures before the answer head: the connection was refused, reset or closed, or the head was garbage. */
const RETRYABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_CLOSED', 'HPE_INVALID_STATUS', 'HPE_INVALID_CONSTANT', 'HPE_INVALID_HEADER_TOKEN', 'HPE_INVALID_VERSION'])

export function retryableError(error: unknown): boolean {
  const e = error as { code?: string; cause?: { code?: string } } | undefined
  // undici's parser errors (a head that is not HTTP) carry no code, only their class name.
  if ((error as Error | undefined)?.name === 'HTTPParserError') return true
  const code = e?.code ?? ''
  if (RETRYABLE_CODES.has(code)) return true
  if (code === 'UND_ERR_INFO' || code.startsWith('HPE_')) return true
  return e?.cause?.code !== undefined && RETRYABLE_CODES.has(e.cause.code)
}

/** Methods that never write, by HTTP semantics. */
export function safeMethod(method: string): boolean {
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS'
}
