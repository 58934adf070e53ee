/**
 * Write batching per event-loop turn for streamed answers. A chunk written from inside the upstream's
 * read callback goes out at once, and on loopback (or a busy VM) a write that wakes a sleeping peer
 * costs about twice one made while the peer is awake. Corking every streamed answer written during a
 * turn and uncorking them all when the turn's I/O has been handled (check phase) sends them back to
 * back; the delay is the rest of the current turn, never a timer. Answers that are whole in memory
 * are ended at the turn's end instead (pipeline.ts), which measured better than corking them.
 *
 * @example
 * ```ts
 * corkUntilTurnEnd(res)
 * res.write(chunk) // goes out when the turn's I/O is handled
 * ```
 */
import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

const CORKED = Symbol('corked-until-turn-end')

type Corkable = Socket & { [CORKED]?: boolean }

let corked: Corkable[] = []

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
