/**
 * Requests the HTTP parser refused, before any route (headers too large, a request not received in
 * time, bytes that are not HTTP): answered in the default error format, counted and logged like an
 * unmatched request, then the connection is closed.
 */
import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import { errors, type GatewayError } from '../errors.ts'
import { jsonErrorFormat } from '../error-format.ts'
import type { PipelineDeps } from '../pipeline.ts'
import { whenAnswersDone } from './pending-answers.ts'

/** The public server's `clientError` handler. */
export function answerParserRefusal(deps: Pick<PipelineDeps, 'log' | 'accessLog' | 'unmatched'>, error: NodeJS.ErrnoException, socket: Socket): void {
  if (!socket.writable) return void socket.destroy()
  // Rejected by the HTTP parser, before any route: answered in the default format, then closed.
  const refusal =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? errors.headersTooLarge('request headers are too large')
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? errors.requestTimeout('the request was not received in time')
        : errors.malformedRequest('malformed HTTP request')
  const rendered = jsonErrorFormat(refusal, undefined)
  const body = String(rendered.body)
  recordRefusal(deps, refusal, error, socket)
  // Answers to requests pipelined before the refused bytes go out first: their work is done
  // (and charged), so cutting them off would charge for answers the client never receives.
  whenAnswersDone(socket, () => {
    if (!socket.writable) return void socket.destroy()
    // Closed once the refusal is out, not left half-open: a request the bad bytes interrupted
    // then sees its connection close at once, so its reservation is released (in `done`)
    // instead of waiting for a body that can never arrive.
    socket.end(`HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status]}\r\ncontent-type: ${rendered.headers['content-type']}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`, () => socket.destroy())
  })
}

/**
 * The access line and request count of a request the HTTP parser refused. Nothing of the request
 * is logged but its client's address: the bytes were not parsed, so there is no route to tell a
 * credential path segment from the rest, and the path may carry a key.
 */
function recordRefusal(deps: Pick<PipelineDeps, 'log' | 'accessLog' | 'unmatched'>, refusal: GatewayError, error: NodeJS.ErrnoException, socket: Socket): void {
  deps.unmatched.count(undefined, refusal.status)
  if (!deps.accessLog) return
  const line = refusal.status >= 500 ? deps.log.error : deps.log.warn
  line.call(deps.log, {
    route: '-',
    method: '-',
    path: '-',
    status: refusal.status,
    ip: socket.remoteAddress ?? '',
    error: refusal.code,
    parserError: error.code,
  })
}
