/**
 * The tag check against the stand-in's copy of the upstream rules (examples/upstreams/tagged.ts):
 * whatever the gateway refuses, it refuses with the text the proof server would answer.
 */
import t from 'tap'
import { compileTaggedCheck, MAX_HEADER_BYTES } from '../../../plugins/binary-validator/tagged-header.ts'
import { compileItemParser } from '../../../plugins/prove-batch/items.ts'
import { buildCheckPayload, buildProvePayload, buildProveTxPayload, headerMismatch, PROOF_TAGS } from '../../../examples/upstreams/tagged.ts'

const tagOf = (header: string) => header.slice('midnight:'.length, -1)
const PREIMAGE = { value: 1, type: 'ProofPreimageVersioned' }
const prove = compileTaggedCheck({ tags: [tagOf(PROOF_TAGS.prove.request)], discriminant: PREIMAGE })
const proveTx = compileTaggedCheck({ tags: [tagOf(PROOF_TAGS.proveTx.request)] })

t.test('valid payloads of each endpoint pass', async (t) => {
  t.equal(prove(buildProvePayload(Buffer.from('preimage'))), null)
  t.equal(proveTx(buildProveTxPayload(Buffer.from('tx'))), null)
  const check = compileTaggedCheck({ tags: [tagOf(PROOF_TAGS.check.request)], discriminant: PREIMAGE })
  t.equal(check(buildCheckPayload(Buffer.alloc(64))), null)
  t.equal(check(buildProvePayload(Buffer.from('x')))?.code, 'header_tag_mismatch', 'a /prove payload is not a /check one')
})

t.test('header refusals carry exactly the upstream text', async (t) => {
  const cases: [string, Buffer, string][] = [
    ['json body', Buffer.from('{"a":1}'), 'invalid_tagged_header'],
    ['empty body', Buffer.alloc(0), 'invalid_tagged_header'],
    ['prefix only', Buffer.from('midnight:'), 'invalid_tagged_header'],
    ['empty tag', Buffer.from('midnight::rest'), 'invalid_tagged_header'],
    ['no second colon in 512 bytes', Buffer.from('midnight:' + 'a'.repeat(MAX_HEADER_BYTES + 10) + ':x'), 'invalid_tagged_header'],
    ['forbidden character in tag', Buffer.from('midnight:transaction v9:xx'), 'invalid_tagged_header'],
    ['older ledger tag', Buffer.from(PROOF_TAGS.proveTx.request.replace('[v9]', '[v8]') + 'tx'), 'header_tag_mismatch'],
    ['non-ascii bytes', Buffer.from([0xff, 0xfe, 0x00, 0x41, 0xe2, 0x82, 0xac]), 'invalid_tagged_header'],
  ]
  for (const [name, body, code] of cases) {
    const problem = proveTx(body)
    t.equal(problem?.code, code, name)
    t.equal(problem?.message, headerMismatch(body, PROOF_TAGS.proveTx.request), `${name}: message`)
  }
})

t.test('the second colon may sit at byte 511 but not beyond', async (t) => {
  const tag = 'a'.repeat(MAX_HEADER_BYTES - 'midnight:'.length - 1)
  const check = compileTaggedCheck({ tags: [tag] })
  t.equal(check(Buffer.from(`midnight:${tag}:x`)), null)
  t.equal(check(Buffer.from(`midnight:${tag}a:x`))?.code, 'invalid_tagged_header')
})

t.test('discriminant and truncation', async (t) => {
  const header = Buffer.from(PROOF_TAGS.prove.request)
  t.same(prove(Buffer.concat([header, Buffer.from([0, 1, 2])])), {
    code: 'invalid_discriminant',
    message: 'invalid old discriminant for ProofPreimageVersioned: 0',
  })
  t.same(prove(Buffer.concat([header, Buffer.from([7, 1])])), { code: 'invalid_discriminant', message: 'unknown discriminant for ProofPreimageVersioned: 7' })
  t.same(prove(header), { code: 'truncated_payload', message: 'failed to fill whole buffer' })
  t.same(prove(Buffer.concat([header, Buffer.from([1])])), { code: 'truncated_payload', message: 'failed to fill whole buffer' })
  t.same(proveTx(Buffer.from(PROOF_TAGS.proveTx.request)), { code: 'truncated_payload', message: 'failed to fill whole buffer' })
})

t.test('several accepted tags: any passes, the message names all', async (t) => {
  const check = compileTaggedCheck({ tags: ['transaction[v9]', 'transaction[v10]'] })
  t.equal(check(Buffer.from('midnight:transaction[v10]:x')), null)
  t.equal(check(Buffer.from('midnight:transaction[v9]:x')), null)
  t.match(check(Buffer.from('midnight:transaction[v8]:x'))?.message, /^expected header tag 'midnight:transaction\[v9\]:' or 'midnight:transaction\[v10\]:', got '/)
})

t.test('batch elements: shape, base64 and the same tag check', async (t) => {
  const parse = compileItemParser('proofs', {
    prove: { path: '/prove', validate: { tags: [tagOf(PROOF_TAGS.prove.request)], discriminant: PREIMAGE } },
    'prove-tx': { path: '/prove-tx', validate: { tags: [tagOf(PROOF_TAGS.proveTx.request)] } },
  })
  const payload = buildProvePayload(Buffer.from('p'))
  const ok = parse({ endpoint: 'prove', payload: payload.toString('base64') }, 0)
  t.same(ok, { ok: true, endpoint: 'prove', path: '/prove', payload })
  const invalid = (item: unknown) => {
    const parsed = parse(item, 3)
    return parsed.ok ? 'accepted' : `${parsed.error.code}: ${parsed.error.message}`
  }
  t.equal(invalid('x'), 'invalid_item: proofs[3] must be an object with endpoint and payload')
  t.equal(invalid({ endpoint: 'k', payload: 'AA==' }), 'invalid_item: proofs[3].endpoint must be one of prove or prove-tx')
  t.equal(invalid({ endpoint: 'toString', payload: 'AA==' }), 'invalid_item: proofs[3].endpoint must be one of prove or prove-tx')
  t.equal(invalid({ endpoint: 'prove', payload: 'not base64!' }), 'invalid_item: proofs[3].payload must be a non-empty standard base64 string')
  t.equal(invalid({ endpoint: 'prove', payload: 'AAA' }), 'invalid_item: proofs[3].payload must be a non-empty standard base64 string')
  t.equal(invalid({ endpoint: 'prove', payload: '' }), 'invalid_item: proofs[3].payload must be a non-empty standard base64 string')
  t.equal(invalid({ endpoint: 'prove', payload: 'AA==', tee: true }), 'invalid_item: proofs[3] has an unknown member "tee"')
  const txAsProve = parse({ endpoint: 'prove', payload: buildProveTxPayload(Buffer.from('t')).toString('base64') }, 0)
  t.equal(txAsProve.ok ? '' : txAsProve.error.code, 'header_tag_mismatch')
  t.equal(txAsProve.ok ? 0 : txAsProve.error.status, 400)
})
