/**
 * Shared plumbing for the local stand-in upstreams: a node:http server on loopback that records
 * every request it receives (so tests can assert what reached the upstream, e.g. that no API key
 * did), reads each body in full, and hands it to the stand-in's handler.
 *
 * Stand-ins are test and demo fixtures, not product code: they must never need an outside service.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'

/** One request as the stand-in saw it. */
export interface RecordedRequest {
  method: string
  /** Path and query exactly as received (`req.url`). */
  path: string
  headers: Record<string, string | string[] | undefined>
  /** Body length in bytes, counted even when the body itself is not kept. */
  bodyBytes: number
  /** The body, kept only up to {@link StandInOptions.recordBodyLimit} bytes. */
  body?: Buffer
}

/** A running stand-in upstream. */
export interface StandIn {
  /** Base URL without a trailing slash, e.g. `http://127.0.0.1:41234`. */
  url: string
  port: number
  /** Stops listening and destroys open sockets, so pending (delayed) answers are dropped. */
  close(): Promise<void>
  /** Requests received so far, oldest first (bounded by `recordLimit`). */
  requests: RecordedRequest[]
  /** Forgets recorded requests. */
  reset(): void
}

export interface StandInOptions {
  /** Interface to bind; default 127.0.0.1. */
  host?: string
  /** Port; default 0 (any free port). */
  port?: number
  /** Keep at most this many recorded requests, dropping the oldest; default 10 000 (benches). */
  recordLimit?: number
  /** Keep request bodies up to this size; larger ones are counted but not kept. Default 64 KiB. */
  recordBodyLimit?: number
}

/** What a stand-in's handler gets: the request, its full body, and the response to write. */
export type StandInHandler = (req: IncomingMessage, body: Buffer, res: ServerResponse) => void | Promise<void>

/** Extra hooks for a stand-in: `onClose` runs before sockets are destroyed (e.g. clear timers). */
export interface StandInHooks {
  onClose?: () => void
}

/**
 * Starts a recording HTTP server on loopback.
 *
 * @example
 * ```ts
 * const standIn = await startStandIn({}, (req, body, res) => { res.end('ok') })
 * await fetch(standIn.url)
 * standIn.requests[0].method // 'GET'
 * await standIn.close()
 * ```
 */
export async function startStandIn(
  options: StandInOptions,
  handler: StandInHandler,
  hooks: StandInHooks = {},
): Promise<StandIn> {
  const recordLimit = options.recordLimit ?? 10_000
  const recordBodyLimit = options.recordBodyLimit ?? 64 * 1024
  const requests: RecordedRequest[] = []

  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    let bodyBytes = 0
    req.on('data', (chunk: Buffer) => {
      bodyBytes += chunk.length
      chunks.push(chunk)
    })
    req.on('error', () => res.destroy())
    req.on('end', () => {
      const body = Buffer.concat(chunks, bodyBytes)
      requests.push({
        method: req.method ?? '',
        path: req.url ?? '',
        headers: { ...req.headers },
        bodyBytes,
        body: bodyBytes <= recordBodyLimit ? body : undefined,
      })
      if (requests.length > recordLimit) requests.splice(0, requests.length - recordLimit)
      Promise.resolve()
        .then(() => handler(req, body, res))
        .catch(() => {
          // A stand-in bug must still answer, or the test would hang until its timeout.
          if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' })
          res.end('stand-in handler failed')
        })
    })
  })
  // Proving can be slow; keep idle keep-alive sockets longer than undici's 4 s default so the
  // client, not the server, decides when a pooled socket goes away.
  server.keepAliveTimeout = 10_000

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  const { port, address, family } = server.address() as AddressInfo
  const host = family === 'IPv6' ? `[${address}]` : address

  return {
    url: `http://${host}:${port}`,
    port,
    requests,
    reset: () => {
      requests.length = 0
    },
    close: () =>
      new Promise<void>((resolve) => {
        hooks.onClose?.()
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

/** Writes a complete response with an explicit Content-Length (no chunked encoding). */
export function send(
  res: ServerResponse,
  status: number,
  body: string | Buffer,
  contentType?: string,
  extraHeaders: Record<string, string> = {},
): void {
  if (res.destroyed) return
  const payload = typeof body === 'string' ? Buffer.from(body, 'utf8') : body
  const headers: Record<string, string | number> = { 'content-length': payload.length, ...extraHeaders }
  if (contentType !== undefined) headers['content-type'] = contentType
  res.writeHead(status, headers)
  res.end(payload)
}

/** Parses `--name value` flags (and bare `--flag` as `'true'`) from a command line. */
export function parseFlags(argv: readonly string[]): Record<string, string> {
  const flags: Record<string, string> = {}
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (!arg.startsWith('--')) continue
    const [name, inline] = arg.slice(2).split('=', 2)
    if (inline !== undefined) flags[name] = inline
    else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) flags[name] = argv[++i]
    else flags[name] = 'true'
  }
  return flags
}

/** True when `moduleUrl` (pass `import.meta.url`) is the script node was started with. */
export function isMainModule(moduleUrl: string): boolean {
  const entry = process.argv[1]
  return entry !== undefined && pathToFileURL(entry).href === moduleUrl
}

/**
 * Runs a stand-in as a process: starts it, prints its URL on stdout, stops on SIGTERM/SIGINT.
 *
 * @example
 * ```ts
 * if (isMainModule(import.meta.url)) void runStandalone('proof-server', (flags) => startProofServer({ port: Number(flags.port) }))
 * ```
 */
export async function runStandalone(
  label: string,
  start: (flags: Record<string, string>) => Promise<StandIn>,
): Promise<void> {
  const flags = parseFlags(process.argv.slice(2))
  const standIn = await start(flags)
  process.stdout.write(`${label} stand-in listening on ${standIn.url}\n`)
  const stop = () => {
    void standIn.close().then(() => process.exit(0))
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}

/** Reads a numeric flag; undefined when absent, an error naming the flag when not a number. */
export function numberFlag(flags: Record<string, string>, name: string): number | undefined {
  const raw = flags[name]
  if (raw === undefined) return undefined
  const value = Number(raw)
  if (!Number.isFinite(value) || value < 0) throw new Error(`--${name} must be a non-negative number, got '${raw}'`)
  return value
}
