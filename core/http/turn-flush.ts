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

const CORKED = Symbol('corked-until-turn-end')

type Corkable = ServerResponse & { [CORKED]?: boolean }

let corked: Corkable[] = []

/** Holds what `res` writes during this turn; a no-op when it already does. */
export function corkUntilTurnEnd(res: ServerResponse): void {
  const response = res as Corkable
  if (response[CORKED]) return
  if (corked.length === 0) setImmediate(uncorkAll)
  response[CORKED] = true
  response.cork()
  corked.push(response)
}

function uncorkAll(): void {
  const batch = corked
  corked = []
  for (const res of batch) {
    res[CORKED] = false
    res.uncork()
  }
}
