/**
 * Stand-in for the privacy network's proof server v7.0.0 (midnight-ledger `proof-server/`, tag
 * ledger-7.0.0), speaking its wire format without proving anything.
 *
 * Routes (anything else, including a wrong method, is an empty 404 as in actix):
 * - GET `/`, `/health` → `{"status":"ok","timestamp":"<time-crate human format>"}` (application/json)
 * - GET `/ready` → `{status, jobsProcessing, jobsPending, jobCapacity, timestamp}`; 503 `busy` when full
 * - GET `/version` → `7.0.0`; GET `/proof-versions` → `["V2"]` (text/plain; charset=utf-8)
 * - POST `/prove`, `/check`, `/prove-tx` → exact header check, then (`/prove`, `/check`) the 0x01
 *   discriminant, then a job: after `provingDelayMs` the answer is the endpoint's response header
 *   followed by bytes derived from sha256(request body), so different inputs give different proofs.
 * - POST `/k` → decimal k for a `midnight:ir-source[v2]:` body, else 400 `Unsupported ZKIR version`.
 *   No `/fetch-params` (the real one only registers it when fetching is on; never expose it).
 *
 * Errors are text/plain like actix's: 400 `expected header tag '…', got '…'`, `failed to fill
 * whole buffer` (body ends after the header), `invalid old discriminant for
 * ProofPreimageVersioned: 0`, `unknown discriminant for ProofPreimageVersioned: N`; 429
 * `Job Queue full` when `jobCapacity` pending jobs wait already.
 *
 * Queue model: like the real worker pool, at most `workers` jobs run at once and the rest wait as
 * pending; `jobCapacity` (0 = unlimited) bounds the pending ones. The real default is 2 workers;
 * the stand-in defaults to unlimited workers so a bench measures the gateway, not this queue.
 * With unlimited workers nothing is ever pending, so to see a 429 set `workers` too, e.g.
 * `{ workers: 1, jobCapacity: 1 }`: the third concurrent job is refused.
 *
 * Stand-in test hooks (not upstream behaviour): when the bytes after the header (and, for
 * `/prove` and `/check`, the discriminant) start with ASCII
 * - `FAIL500` → 500 `internal error` (as a job that failed inside the server),
 * - `BADINPUT` → 400 `bad input` (as a preimage the prover rejects),
 * both after the queue and the proving delay, like real job failures.
 *
 * Run alone: `node --import tsx examples/upstreams/proof-server.ts --port 18300 --delay 200
 * [--capacity N] [--workers N] [--host 127.0.0.1]`; prints its URL, stops on SIGTERM.
 */
import type { ServerResponse } from 'node:http'
import {
  isMainModule,
  numberFlag,
  runStandalone,
  send,
  startStandIn,
  type StandIn,
  type StandInOptions,
} from './standin.ts'
import { digest, headerMismatch, PREIMAGE_V2_DISCRIMINANT, PROOF_TAGS } from './tagged.ts'

export type { StandIn, RecordedRequest } from './standin.ts'

export interface ProofServerOptions extends StandInOptions {
  /** How long each job "proves" before answering; default 0. The bench uses 200. */
  provingDelayMs?: number
  /** Max pending jobs before 429 `Job Queue full`; 0 (default) = unlimited, as upstream. */
  jobCapacity?: number
  /** Jobs running at once; default unlimited (upstream default is 2). */
  workers?: number
}

/** Version string the real server answers on GET /version (CARGO_PKG_VERSION). */
export const PROOF_SERVER_VERSION = '7.0.0'

const TEXT = 'text/plain; charset=utf-8'
const JSON_TYPE = 'application/json'
/** Rust's io error when a value is cut short (read_exact hitting EOF). */
const CUT_SHORT = 'failed to fill whole buffer'

type JobOutcome = { status: number; body: Buffer | string; contentType?: string }

/**
 * The `time` crate's serde human-readable OffsetDateTime form, as the real server writes it:
 * `YYYY-MM-DD HH:MM:SS.f +00:00:00` (sub-second digits without trailing zeros).
 */
export function humanTimestamp(date: Date = new Date()): string {
  const pad = (n: number, width = 2) => String(n).padStart(width, '0')
  const fraction = pad(date.getUTCMilliseconds(), 3).replace(/0+$/, '') || '0'
  return (
    `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())} ` +
    `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}.${fraction} +00:00:00`
  )
}

/** Where the stand-in's failure hooks look: the body after header (+ discriminant). */
function hookOutcome(payload: Buffer): JobOutcome | null {
  if (payload.subarray(0, 7).toString('latin1') === 'FAIL500') return { status: 500, body: 'internal error', contentType: TEXT }
  if (payload.subarray(0, 8).toString('latin1') === 'BADINPUT') return { status: 400, body: 'bad input', contentType: TEXT }
  return null
}

/** Checks a `/prove` or `/check` body up to the discriminant; returns the error text or the rest. */
function parsePreimageRequest(body: Buffer, header: string): { error: string } | { payload: Buffer } {
  const mismatch = headerMismatch(body, header)
  if (mismatch !== null) return { error: mismatch }
  const rest = body.subarray(Buffer.byteLength(header, 'ascii'))
  if (rest.length === 0) return { error: CUT_SHORT }
  const discriminant = rest[0]
  if (discriminant === 0) return { error: `invalid old discriminant for ProofPreimageVersioned: ${discriminant}` }
  if (discriminant !== PREIMAGE_V2_DISCRIMINANT) return { error: `unknown discriminant for ProofPreimageVersioned: ${discriminant}` }
  // A V2 preimage has fields; nothing after the discriminant cannot be one.
  if (rest.length === 1) return { error: CUT_SHORT }
  return { payload: rest.subarray(1) }
}

/** Same for `/prove-tx`, whose tuple starts with the transaction (no discriminant). */
function parseTxRequest(body: Buffer): { error: string } | { payload: Buffer } {
  const mismatch = headerMismatch(body, PROOF_TAGS.proveTx.request)
  if (mismatch !== null) return { error: mismatch }
  const rest = body.subarray(Buffer.byteLength(PROOF_TAGS.proveTx.request, 'ascii'))
  return rest.length === 0 ? { error: CUT_SHORT } : { payload: rest }
}

/**
 * Starts the stand-in proof server on loopback (port 0 unless given).
 *
 * @example
 * ```ts
 * const proofServer = await startProofServer({ provingDelayMs: 200 })
 * const res = await fetch(`${proofServer.url}/prove`, { method: 'POST', body: buildProvePayload(Buffer.from('a')) })
 * // 200, body starts with 'midnight:proof-versioned:' + 0x01
 * await proofServer.close()
 * ```
 */
export async function startProofServer(options: ProofServerOptions = {}): Promise<StandIn> {
  const delayMs = options.provingDelayMs ?? 0
  const capacity = options.jobCapacity ?? 0
  const workers = options.workers ?? Number.POSITIVE_INFINITY
  const timers = new Set<NodeJS.Timeout>()
  const waiting: Array<() => void> = []
  let processing = 0

  const isFull = () => capacity !== 0 && waiting.length >= capacity

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        timers.delete(timer)
        resolve()
      }, ms)
      timers.add(timer)
    })

  /** Queues a job as the real pool does; null when the queue is full. */
  async function runJob(work: () => JobOutcome): Promise<JobOutcome | null> {
    if (isFull()) return null
    if (processing < workers) processing++
    else await new Promise<void>((resolve) => waiting.push(resolve))
    try {
      if (delayMs > 0) await sleep(delayMs)
      return work()
    } finally {
      const next = waiting.shift()
      if (next) next() // the slot passes straight to the next job
      else processing--
    }
  }

  async function answerJob(res: ServerResponse, payload: Buffer, success: () => Buffer): Promise<void> {
    const outcome = await runJob(() => hookOutcome(payload) ?? { status: 200, body: success() })
    if (outcome === null) send(res, 429, 'Job Queue full', TEXT)
    else send(res, outcome.status, outcome.body, outcome.contentType)
  }

  const readiness = () => {
    const full = isFull()
    return {
      status: full ? 503 : 200,
      body: JSON.stringify({
        status: full ? 'busy' : 'ok',
        jobsProcessing: processing,
        jobsPending: waiting.length,
        jobCapacity: capacity,
        timestamp: humanTimestamp(),
      }),
    }
  }

  return startStandIn(
    options,
    async (req, body, res) => {
      const path = new URL(req.url ?? '/', 'http://stand-in').pathname
      const route = `${req.method ?? ''} ${path}`
      switch (route) {
        case 'GET /':
        case 'GET /health':
          return send(res, 200, JSON.stringify({ status: 'ok', timestamp: humanTimestamp() }), JSON_TYPE)
        case 'GET /ready': {
          const ready = readiness()
          return send(res, ready.status, ready.body, JSON_TYPE)
        }
        case 'GET /version':
          return send(res, 200, PROOF_SERVER_VERSION, TEXT)
        case 'GET /proof-versions':
          return send(res, 200, '["V2"]', TEXT)
        case 'POST /prove':
        case 'POST /check': {
          const tags = path === '/prove' ? PROOF_TAGS.prove : PROOF_TAGS.check
          const parsed = parsePreimageRequest(body, tags.request)
          if ('error' in parsed) return send(res, 400, parsed.error, TEXT)
          return answerJob(res, parsed.payload, () =>
            path === '/prove'
              ? Buffer.concat([Buffer.from(tags.response, 'ascii'), Buffer.from([PREIMAGE_V2_DISCRIMINANT]), digest(body)])
              : Buffer.concat([Buffer.from(tags.response, 'ascii'), digest(body)]),
          )
        }
        case 'POST /prove-tx': {
          const parsed = parseTxRequest(body)
          if ('error' in parsed) return send(res, 400, parsed.error, TEXT)
          return answerJob(res, parsed.payload, () =>
            Buffer.concat([Buffer.from(PROOF_TAGS.proveTx.response, 'ascii'), digest(body)]),
          )
        }
        case 'POST /k': {
          // The real server tries to parse ZKIR and has a single answer for every failure.
          const header = PROOF_TAGS.k.request
          if (headerMismatch(body, header) !== null || body.length === header.length) {
            return send(res, 400, 'Unsupported ZKIR version', TEXT)
          }
          // A k between 10 and 15 (the range the real server preloads), stable per input.
          return send(res, 200, String(10 + (digest(body)[0] % 6)))
        }
        default:
          return send(res, 404, '')
      }
    },
    {
      onClose: () => {
        for (const timer of timers) clearTimeout(timer)
        timers.clear()
      },
    },
  )
}

if (isMainModule(import.meta.url)) {
  void runStandalone('proof-server', (flags) =>
    startProofServer({
      host: flags.host,
      port: numberFlag(flags, 'port') ?? 6300,
      provingDelayMs: numberFlag(flags, 'delay'),
      jobCapacity: numberFlag(flags, 'capacity'),
      workers: numberFlag(flags, 'workers'),
    }),
  )
}
