/**
 * Writing a response head that node may refuse. `res.writeHead` throws, before writing a byte, on a
 * header name or value it will not send (a line break in a plugin's value, a name with a space, an
 * `undefined`): uncaught, that throw ended the process, and the error answer that followed carried
 * the same headers and threw again. Here the head is written without the refused headers instead,
 * and their names are reported (never their values, which may hold anything a plugin copied).
 *
 * @example
 * writeHeadKeeping(res, 200, ['x-ok', '1', 'x-bad', 'a\r\nb'], (names) => log.error({ names }))
 * // sends `x-ok` only and reports ['x-bad']
 */
import { validateHeaderName, validateHeaderValue, type OutgoingHttpHeaders, type ServerResponse } from 'node:http'

/** A head as node's flat list, `[name, value, name, value, ...]`. */
export type HeadList = (string | string[] | number | undefined)[]

/**
 * The answer's headers, then the ones plugins added for the client (which replace the answer's of
 * the same name), as one flat list for `writeHead`. Why not the plugins' headers copied into the
 * answer's object: each copy is a keyed store that changes the object's shape, and node's
 * `writeHead` then walks the object with `for in` and a `hasOwn` per name; node reads a flat list
 * with an index. What node checks of each header is the same either way.
 */
export function headList(headers: OutgoingHttpHeaders, extra: Readonly<Record<string, string>>): HeadList {
  const list: HeadList = []
  // Own names only, as node's walk of an object takes them.
  const names = Object.keys(headers)
  for (let i = 0; i < names.length; i++) {
    const name = names[i]!
    if (!Object.hasOwn(extra, name)) list.push(name, headers[name])
  }
  for (const name in extra) list.push(name, extra[name])
  return list
}

/** Codes node throws for a header it refuses (any other error is not ours to hide). */
const REFUSED = new Set(['ERR_INVALID_CHAR', 'ERR_INVALID_HTTP_TOKEN', 'ERR_HTTP_INVALID_HEADER_VALUE'])

function acceptable(name: string, value: OutgoingHttpHeaders[string]): boolean {
  try {
    validateHeaderName(name)
    if (Array.isArray(value)) for (const item of value) validateHeaderValue(name, item)
    else validateHeaderValue(name, value as string)
    return true
  } catch {
    return false
  }
}

/** `res.writeHead(status, head)`, or, when node refuses a header, the same head without it. */
export function writeHeadKeeping(res: ServerResponse, status: number, head: HeadList, onRefused: (names: string[]) => void): void {
  try {
    res.writeHead(status, head as unknown as OutgoingHttpHeaders)
    return
  } catch (error) {
    if (!REFUSED.has((error as { code?: string }).code ?? '')) throw error
  }
  const kept: HeadList = []
  const refused: string[] = []
  for (let i = 0; i < head.length; i += 2) {
    const name = head[i] as string
    if (acceptable(name, head[i + 1] as OutgoingHttpHeaders[string])) kept.push(name, head[i + 1])
    else refused.push(name)
  }
  onRefused(refused)
  res.writeHead(status, kept as unknown as OutgoingHttpHeaders)
}
