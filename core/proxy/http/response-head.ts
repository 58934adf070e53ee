/**
 * Writing a response head that node may refuse. `res.writeHead` throws, before writing a byte, on a
 * header name or value it will not send (a line break in a plugin's value, a name with a space, an
 * `undefined`): uncaught, that throw ended the process, and the error answer that followed carried
 * the same headers and threw again. Here the head is written without the refused headers instead,
 * and their names are reported (never their values, which may hold anything a plugin copied).
 *
 * @example
 * writeHeadKeeping(res, 200, { 'x-ok': '1', 'x-bad': 'a\r\nb' }, (names) => log.error({ names }))
 * // sends `x-ok` only and reports ['x-bad']
 */
import { validateHeaderName, validateHeaderValue, type OutgoingHttpHeaders, type ServerResponse } from 'node:http'

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

/** `res.writeHead(status, headers)`, or, when node refuses a header, the same head without it. */
export function writeHeadKeeping(res: ServerResponse, status: number, headers: OutgoingHttpHeaders, onRefused: (names: string[]) => void): void {
  try {
    res.writeHead(status, headers)
    return
  } catch (error) {
    if (!REFUSED.has((error as { code?: string }).code ?? '')) throw error
  }
  const kept: OutgoingHttpHeaders = {}
  const refused: string[] = []
  for (const name in headers) {
    if (acceptable(name, headers[name])) kept[name] = headers[name]
    else refused.push(name)
  }
  onRefused(refused)
  res.writeHead(status, kept)
}
