/**
 * The terminal size of a workstation shell: what the browser may ask for and how it reaches the
 * pseudo-terminal. The shell runs under util-linux `script`, whose stdin is a pipe, so `script`
 * never learns a window size and forwards no SIGWINCH; the terminal server sets the size on the
 * pty slave itself with `stty -F /dev/pts/N cols C rows R` (TIOCSWINSZ), and the kernel then sends
 * SIGWINCH to the shell's foreground process group, as a terminal emulator would.
 *
 * Wire format (terminal-server.ts and its page): keystrokes travel as binary WebSocket frames, a
 * text frame is a control message, `{"type":"resize","cols":N,"rows":M}`; so no typed or pasted
 * text can ever be taken for a resize. The first size comes in the socket URL (`pty?cols=N&rows=M`).
 */
import { execFile } from 'node:child_process'
import { readFileSync, readlinkSync } from 'node:fs'

export interface TermSize {
  cols: number
  rows: number
}

/** Bounds of an accepted size; anything outside is ignored, not clamped. */
export const MAX_COLS = 1000
export const MAX_ROWS = 500
/** What the shell gets when the client says nothing (or nonsense): the classic VT100 size. */
export const DEFAULT_SIZE: TermSize = { cols: 80, rows: 24 }

const inRange = (value: unknown, max: number): value is number => typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= max

/** A size from numbers (a parsed control message); undefined unless both are integers in range. */
export function validSize(cols: unknown, rows: unknown): TermSize | undefined {
  return inRange(cols, MAX_COLS) && inRange(rows, MAX_ROWS) ? { cols, rows } : undefined
}

/** The size in the socket URL's query (`cols`, `rows`: plain decimal digits), else undefined. */
export function sizeFromQuery(query: URLSearchParams): TermSize | undefined {
  const cols = query.get('cols')
  const rows = query.get('rows')
  if (!cols || !rows || !/^\d{1,4}$/.test(cols) || !/^\d{1,4}$/.test(rows)) return undefined
  return validSize(Number(cols), Number(rows))
}

/** A text frame's resize request, or undefined for anything else (not JSON, other type, bad numbers). */
export function resizeRequest(text: string): TermSize | undefined {
  if (text.length > 200) return undefined // a resize is ~40 bytes; parsing more is wasted work
  let message: unknown
  try {
    message = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return undefined
  const { type, cols, rows } = message as Record<string, unknown>
  return type === 'resize' ? validSize(cols, rows) : undefined
}

/** The pseudo-terminal slave (`/dev/pts/N`) a child of `pid` has on fd 0, 1 or 2; the shell under `script`. */
export function ptySlaveOfChild(pid: number): string | undefined {
  let children: string[]
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)
  } catch {
    return undefined
  }
  for (const child of children) {
    for (const fd of [0, 1, 2]) {
      try {
        const target = readlinkSync(`/proc/${child}/fd/${fd}`)
        if (/^\/dev\/pts\/\d+$/.test(target)) return target
      } catch { /* gone or not ours */ }
    }
  }
  return undefined
}

/**
 * Applies sizes to the pty of one `script` process. One `stty` at a time and only the newest
 * size waits behind it, so a burst of resizes ends at the last one. Until the shell under
 * `script` exists (just after spawn) the lookup is retried for a while.
 */
export class PtyResizer {
  private slave: string | undefined
  private pending: TermSize | undefined
  private running = false
  private closed = false

  constructor(private readonly scriptPid: number, private readonly onError: (message: string) => void = () => {}) {}

  resize(size: TermSize): void {
    this.pending = size
    if (!this.running) void this.drain()
  }

  close(): void {
    this.closed = true
    this.pending = undefined
  }

  private async drain(): Promise<void> {
    this.running = true
    try {
      for (let attempt = 0; this.pending && !this.closed; ) {
        this.slave ??= ptySlaveOfChild(this.scriptPid)
        if (!this.slave) {
          if (++attempt > 50) return this.onError(`no pty found under process ${this.scriptPid}`)
          await new Promise((resolve) => setTimeout(resolve, 100))
          continue
        }
        const { cols, rows } = this.pending
        this.pending = undefined
        await new Promise<void>((resolve) => execFile('stty', ['-F', this.slave!, 'cols', String(cols), 'rows', String(rows)], { timeout: 5000 }, (error) => {
          if (error && !this.closed) this.onError(`stty -F ${this.slave}: ${error.message.trim()}`)
          resolve()
        }))
      }
    } finally {
      this.running = false
    }
  }
}
