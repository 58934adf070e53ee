import t from 'tap'
import { GatewayError } from '../../../core/proxy/errors.ts'
import { capLimit } from '../../../plugins/mirror-validate/limit-cap.ts'
import { mirrorErrorFormat } from '../../../plugins/mirror-validate/error-format.ts'

t.test('mirror error format: every GatewayError in the node envelope', async (t) => {
  const limited = mirrorErrorFormat(new GatewayError(429, 'rate_limited', 'rate limit of 5 requests exceeded; retry after 2 s', { headers: { 'retry-after': '2' } }), undefined)
  t.equal(limited.status, 429)
  t.same(limited.headers, { 'content-type': 'application/json; charset=utf-8', 'retry-after': '2' })
  t.equal(limited.body, '{"_status":{"messages":[{"message":"rate limit of 5 requests exceeded; retry after 2 s"}]}}')
  const detailed = new GatewayError(400, 'invalid_parameter', 'Bad Request: x', { detail: { mirrorMessages: [{ message: 'Bad Request', detail: "Failed to convert 'id'" }] } })
  t.equal(mirrorErrorFormat(detailed, undefined).body, `{"_status":{"messages":[{"message":"Bad Request","detail":"Failed to convert 'id'"}]}}`)
  const odd = new GatewayError(400, 'x', 'plain', { detail: { mirrorMessages: [{ nope: 1 }] } })
  t.equal(mirrorErrorFormat(odd, undefined).body, '{"_status":{"messages":[{"message":"plain"}]}}', 'malformed detail falls back to the message')
})

t.test('capLimit: limits above the maximum are capped, case-insensitively, operators kept', async (t) => {
  t.equal(capLimit(new URLSearchParams('limit=80&order=asc'), 50), 'limit=50&order=asc')
  t.equal(capLimit(new URLSearchParams('Limit=eq:80'), 50), 'Limit=eq%3A50')
  t.equal(capLimit(new URLSearchParams('limit=50&order=asc'), 50), undefined, 'nothing to cap')
  t.equal(capLimit(new URLSearchParams('limit=99999999999999999999'), 100), 'limit=100')
})
