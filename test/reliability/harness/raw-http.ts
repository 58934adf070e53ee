/**
 * Raw sockets for the suite: send exact bytes (framing the HTTP client libraries would refuse to
 * produce) and parse every response the gateway wrote back, so a test can count answers.
 */
import { connect } from 'node:net'

export interface ParsedResponse {
  status: number
  headers: Record<string, string>
  body: Buffer
  /** The body's length matched its framing (content-length or chunked terminator). */
  complete: boolean
}

export interface RawExchange {
  responses: ParsedResponse[]
  /** The connection was closed (by either side) before the deadline. */
  closed: boolean
  /** The gateway still held the connection open, silent, at the deadline. */
  timedOut: boolean
  /** Bytes that were not a parseable response. */
  trailing: number
}

/** Parses back-to-back HTTP/1.1 responses (responses to HEAD must not be mixed in). */
export function parseResponses(data: Buffer): { responses: ParsedResponse[]; trailing: number } {
  const responses: ParsedResponse[] = []
  let at = 0
  while (at < data.length) {
    const headEnd = data.indexOf('\r\n\r\n', at)
    if (headEnd === -1) break
    const lines = data.subarray(at, headEnd).toString('latin1').split('\r\n')
    const match = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0])
    if (!match) break
    const headers: Record<string, string> = {}
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':')
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
    }
    let cursor = headEnd + 4
    const status = Number(match[1])
    if (headers['transfer-encoding']?.toLowerCase().includes('chunked')) {
      const chunks: Buffer[] = []
      let complete = false
      for (;;) {
        const lineEnd = data.indexOf('\r\n', cursor)
        if (lineEnd === -1) break
        const size = parseInt(data.subarray(cursor, lineEnd).toString('latin1'), 16)
        if (!Number.isFinite(size)) break
        if (size === 0) {
          const end = data.indexOf('\r\n\r\n', lineEnd)
          cursor = end === -1 ? data.length : end + 4
          complete = end !== -1 || data.subarray(lineEnd, lineEnd + 4).toString() === '\r\n\r\n'
          break
        }
        if (lineEnd + 2 + size + 2 > data.length) {
          chunks.push(data.subarray(lineEnd + 2))
          cursor = data.length
          break
        }
        chunks.push(data.subarray(lineEnd + 2, lineEnd + 2 + size))
        cursor = lineEnd + 2 + size + 2
      }
      responses.push({ status, headers, body: Buffer.concat(chunks), complete })
    } else {
      const length = status === 204 || status === 304 ? 0 : Number(headers['content-length'] ?? (headers.connection === 'close' ? data.length - cursor : 0))
      const body = data.subarray(cursor, Math.min(data.length, cursor + length))
      responses.push({ status, headers, body, complete: body.length === length })
      cursor += body.length
    }
    at = cursor
  }
  return { responses, trailing: data.length - at }
}

/**
 * Writes `parts` to a fresh connection (with `gapMs` between parts), half-closes the socket when
 * `end` is set, and collects everything the gateway answers until it closes or `deadlineMs` passes.
 */
export function rawExchange(url: string, parts: Buffer[], options: { end?: boolean; gapMs?: number; deadlineMs?: number } = {}): Promise<RawExchange> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true })
    const received: Buffer[] = []
    let finished = false
    const finish = (closed: boolean) => {
      if (finished) return
      finished = true
      clearTimeout(timer)
      socket.destroy()
      const { responses, trailing } = parseResponses(Buffer.concat(received))
      resolve({ responses, closed, timedOut: !closed, trailing })
    }
    const timer = setTimeout(() => finish(false), options.deadlineMs ?? 10000)
    socket.on('data', (chunk) => received.push(chunk))
    socket.on('end', () => finish(true))
    socket.on('close', () => finish(true))
    socket.on('error', () => finish(true))
    socket.on('connect', async () => {
      for (const part of parts) {
        if (socket.destroyed) return
        socket.write(part)
        if (options.gapMs) await new Promise((r) => setTimeout(r, options.gapMs))
      }
      if (options.end !== false && !socket.destroyed) socket.end()
    })
  })
}
