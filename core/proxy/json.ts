/**
 * Bounded JSON nesting. `JSON.parse` in V8 is iterative and accepts any depth, but
 * `JSON.stringify`, ajv and every recursive walk of ours are not: a 10 KB body of 5,000 nested
 * arrays parses fine and then overflows the stack wherever it is re-serialised or walked. Every
 * JSON text the gateway reads from outside (request bodies, query params, payment headers,
 * upstream and facilitator answers) is therefore measured before it is parsed, and refused past
 * {@link MAX_JSON_DEPTH}.
 *
 * @example
 * ```ts
 * jsonDepthExceeds('[[[1]]]', 2)              // true
 * jsonDepthExceeds('{"a":"[[[[["}', 2)        // false: brackets inside strings do not count
 * parseBoundedJson(Buffer.from('[1,2]'))       // [1, 2]
 * ```
 */

/**
 * Deepest array/object nesting the gateway accepts in any JSON it reads. Far above what any API
 * behind it uses (x402 payloads nest 4 deep, JSON-RPC params rarely 10), far below the ~3,000
 * levels at which `JSON.stringify` overflows Node's default stack.
 */
export const MAX_JSON_DEPTH = 64

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_ARRAY = 0x5b
const OPEN_OBJECT = 0x7b
const CLOSE_ARRAY = 0x5d
const CLOSE_OBJECT = 0x7d

/**
 * True when the text nests arrays/objects deeper than `limit`. Brackets inside strings are
 * skipped; the text need not be valid JSON (then the parse that follows reports it). Works on
 * UTF-8 bytes too: multi-byte sequences never contain ASCII bytes.
 */
export function jsonDepthExceeds(text: string | Buffer, limit = MAX_JSON_DEPTH): boolean {
  const bytes = typeof text !== 'string'
  const length = text.length
  // Nesting past the limit takes more than `limit` opening brackets.
  if (length <= limit) return false
  let depth = 0
  let inString = false
  for (let i = 0; i < length; i++) {
    const c = bytes ? (text as Buffer)[i] : (text as string).charCodeAt(i)
    if (inString) {
      if (c === BACKSLASH) i++
      else if (c === QUOTE) inString = false
    } else if (c === QUOTE) inString = true
    else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > limit) return true
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) depth--
  }
  return false
}

/** Thrown by {@link parseBoundedJson}; `tooDeep` tells nesting from syntax. */
export class JsonTextError extends Error {
  constructor(
    message: string,
    readonly tooDeep: boolean,
  ) {
    super(message)
    this.name = 'JsonTextError'
  }
}

/**
 * `JSON.parse` that refuses nesting past `limit` before parsing.
 *
 * @throws {@link JsonTextError} for invalid JSON or nesting past the limit.
 */
export function parseBoundedJson(text: string | Buffer, limit = MAX_JSON_DEPTH): unknown {
  if (jsonDepthExceeds(text, limit)) throw new JsonTextError(`nests arrays or objects more than ${limit} levels deep`, true)
  try {
    return JSON.parse(typeof text === 'string' ? text : text.toString('utf8'))
  } catch (error) {
    throw new JsonTextError((error as Error).message, false)
  }
}
