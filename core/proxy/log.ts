/**
 * Structured JSON logs (pino). Credentials are redacted wherever a plugin might log them; the core
 * itself only logs the redacted path and never headers.
 */
import pino, { type Logger } from 'pino'

const REDACT = [
  'apiKey', '*.apiKey', 'key', '*.key', 'secret', '*.secret', 'token', '*.token', 'privateKey', '*.privateKey',
  'headers["x-api-key"]', 'headers["x-api-secret"]', 'headers.authorization', '*.headers["x-api-key"]',
  '*.headers["x-api-secret"]', '*.headers.authorization',
]

export interface LogOptions {
  level: string
  /** Where lines go; stdout by default. Tests pass a stream to capture them. */
  destination?: NodeJS.WritableStream
}

export function createLogger(options: LogOptions): Logger {
  const destination = options.destination ?? pino.destination({ dest: 1, sync: false })
  return pino(
    {
      level: options.level,
      base: { pid: process.pid },
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  )
}

/** Flushes buffered lines (on shutdown). */
export function flushLogger(log: Logger): void {
  try {
    log.flush()
  } catch {
    // a destination without a buffer has nothing to flush
  }
}
