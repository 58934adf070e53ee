/**
 * One batch job against the stand-in proof server: success, the server's refusals, a full queue,
 * the per-item timeout, a dead upstream, and the client going away.
 */
import t from 'tap'
import { createUpstream } from '../../../core/proxy/http/upstreams.ts'
import { proveOne, type ProveJob } from '../../../plugins/prove-batch/prove-item.ts'
import { startProofServer } from '../../../examples/upstreams/proof-server.ts'
import { buildProvePayload, digest, PROOF_TAGS } from '../../../examples/upstreams/tagged.ts'
import { closedPort } from '../../helpers/upstream.ts'

const timeouts = { connectMs: 1000, headersMs: 5000, bodyMs: 5000 }
const handle = (url: string) => createUpstream('proofs', { url, connections: 8, keepAliveTimeoutMs: 1000, timeouts })

t.test('outcomes of single jobs', async (t) => {
  const server = await startProofServer({ provingDelayMs: 150, workers: 1, jobCapacity: 1 })
  const upstream = handle(server.url)
  t.teardown(async () => {
    await upstream.pool.close()
    await server.close()
  })
  const job = (payload: Buffer, extra: Partial<ProveJob> = {}): ProveJob => ({
    upstream,
    path: '/prove',
    payload,
    headers: { 'x-request-id': 'r.0' },
    clientSignal: new AbortController().signal,
    timeoutMs: 5000,
    maxResultBytes: 1 << 20,
    ...extra,
  })

  const payload = buildProvePayload(Buffer.from('ok'))
  const result = await proveOne(job(payload))
  const expected = Buffer.concat([Buffer.from(PROOF_TAGS.prove.response), Buffer.from([1]), digest(payload)])
  t.same(result, { ok: true, proof: expected.toString('base64') })
  t.equal(server.requests.at(-1)?.headers['content-type'], 'application/octet-stream')

  t.same(await proveOne(job(buildProvePayload(Buffer.from('BADINPUT')))), {
    ok: false,
    error: { code: 'proof_rejected', message: 'bad input', status: 400 },
  })
  t.same(await proveOne(job(buildProvePayload(Buffer.from('FAIL500')))), {
    ok: false,
    error: { code: 'upstream_error', message: 'internal error', status: 500 },
  })

  // One worker, one pending slot: the third job at once finds the queue full.
  const three = await Promise.all([1, 2, 3].map((n) => proveOne(job(buildProvePayload(Buffer.from(`q${n}`))))))
  t.same(
    three.filter((r) => !r.ok).map((r) => (r.ok ? null : r.error)),
    [{ code: 'upstream_busy', message: 'Job Queue full', status: 429 }],
  )

  t.same(await proveOne(job(payload, { timeoutMs: 40 })), {
    ok: false,
    error: { code: 'upstream_timeout', message: 'proof did not finish within 40 ms', status: 504 },
  })
  t.same(await proveOne(job(payload, { maxResultBytes: 16 })), {
    ok: false,
    error: { code: 'upstream_response_too_large', message: 'proof exceeds 16 bytes', status: 502 },
  })

  const client = new AbortController()
  const pending = proveOne(job(payload, { clientSignal: client.signal }))
  setTimeout(() => client.abort(), 20)
  await t.rejects(pending, 'a client that went away is thrown, not answered')
})

t.test('a dead upstream is that item’s 502', async (t) => {
  const upstream = handle(`http://127.0.0.1:${await closedPort()}`)
  t.teardown(() => upstream.pool.close())
  const result = await proveOne({
    upstream,
    path: '/prove',
    payload: buildProvePayload(Buffer.from('x')),
    headers: {},
    clientSignal: new AbortController().signal,
    timeoutMs: 2000,
    maxResultBytes: 1 << 20,
  })
  t.same(result, { ok: false, error: { code: 'upstream_unavailable', message: 'upstream proofs is unavailable', status: 502 } })
})
