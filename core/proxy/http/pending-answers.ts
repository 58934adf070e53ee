/**
 * Answers still under way on each client connection. With HTTP/1.1 pipelining a client may send
 * a valid request and then bytes the parser refuses; the refusal (400, 431, 408) closes the
 * connection, and if it went out at once it would cut off answers still being produced for the
 * earlier requests, whose work (a stored item, a charged credit) is already done. The refusal
 * waits here until the answers to every request received whole are finished. A request the
 * refused bytes interrupted (a bad chunk inside its body, a body that timed out) can never be
 * answered: it is not waited for, and closing the connection abandons it (its reservation is
 * released in `done`).
 *
 * @example
 * ```ts
 * answerStarted(req)                        // per request
 * res.once('close', () => answerClosed(socket, req))
 * whenAnswersDone(socket, () => socket.end(refusal))   // from the server's clientError
 * ```
 */
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'

const PENDING = Symbol('pending-answers')
const IDLE = Symbol('when-answers-done')

type Tracked = Socket & { [PENDING]?: IncomingMessage[]; [IDLE]?: () => void }

/** An answer to `req` is under way on its connection. */
export function answerStarted(req: IncomingMessage): void {
  const socket = req.socket as Tracked
  ;(socket[PENDING] ??= []).push(req)
}

/**
 * The answer to `req` finished or was abandoned (its response closed). `socket` is the one the
 * request came on: node detaches it from a request whose connection closed.
 */
export function answerClosed(socket: Socket, req: IncomingMessage): void {
  const tracked = socket as Tracked
  const pending = tracked[PENDING]
  // Almost always the connection's only request, or its last: a pop, not a splice.
  if (pending !== undefined && pending[pending.length - 1] === req) pending.pop()
  else {
    const i = pending === undefined ? -1 : pending.indexOf(req)
    if (i !== -1) pending!.splice(i, 1)
  }
  if (tracked[IDLE] && !waitsFor(tracked)) {
    const idle = tracked[IDLE]
    tracked[IDLE] = undefined
    idle()
  }
}

function waitsFor(socket: Tracked): boolean {
  for (const req of socket[PENDING] ?? []) if (req.complete) return true
  return false
}

/** Runs `then` once every request received whole on `socket` has its answer finished (at once when none waits). */
export function whenAnswersDone(socket: Socket, then: () => void): void {
  const tracked = socket as Tracked
  if (!waitsFor(tracked)) return then()
  tracked[IDLE] = then
}
