/**
 * Write batching per event-loop turn. An answer written from inside its read callback goes out at
 * once, and on loopback (or a busy VM) a write that wakes a sleeping peer costs about twice one made
 * while the peer is awake. Writes made during a turn are therefore sent back to back once the turn's
 * I/O has been handled (check phase), which wakes each peer once; the delay is the rest of the
 * current turn, never a timer.
 *
 * - Answers whole in memory are ended then ({@link endAtTurnEnd}). Measured with
 *   bench/mirror-bench.ts on unmetered cache hits: about 14,000 req/s ended at once or corked,
 *   22,000–30,000 ended at the turn's end.
 * - Streamed answers are corked until then ({@link corkUntilTurnEnd}), or until they end: node's
 *   `res.end()` uncorks its socket fully (_http_outgoing.js), so the write that ends a streamed answer
 *   leaves at once with what was held; the later uncork is then a no-op. (Ending such answers at the
 *   turn's end instead measured costlier: bench/RESULTS.md, session 12, head31.)
 *
 * @example
 * ```ts
 * res.writeHead(200, headers)
 * endAtTurnEnd(res, body)      // a whole answer
 * corkUntilTurnEnd(res)
 * res.write(chunk)             // a streamed one: goes out when the turn's I/O is handled
 * ```
 */
import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

const CORKED = Symbol('corked-until-turn-end')

type Corkable = Socket & { [CORKED]?: boolean }

let corked: Corkable[] = []
let ends: { res: ServerResponse; body: Buffer | undefined }[] = []

/** Ends `res` with `body` once this turn's I/O has been handled (unless the client went away). */
export function endAtTurnEnd(res: ServerResponse, body: Buffer | undefined): void {
  if (ends.length === 0) setImmediate(endAll)
  ends.push({ res, body })
}

function endAll(): void {
  const batch = ends
  ends = []
  for (const { res, body } of batch) if (!res.destroyed) res.end(body)
}

/** Holds what `res` writes during this turn; a no-op when its socket already does (or it has none). */
export function corkUntilTurnEnd(res: ServerResponse): void {
  // The socket itself, not the response: a finished response lets go of its socket, and an uncork
  // through it would then be lost, leaving the keep-alive connection corked.
  const socket = res.socket as Corkable | null
  if (socket === null || socket[CORKED] || socket.destroyed) return
  if (corked.length === 0) setImmediate(uncorkAll)
  socket[CORKED] = true
  socket.cork()
  corked.push(socket)
}

function uncorkAll(): void {
  const batch = corked
  corked = []
  for (const socket of batch) {
    socket[CORKED] = false
    socket.uncork()
  }
}
