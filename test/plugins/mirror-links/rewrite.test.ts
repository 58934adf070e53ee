import t from 'tap'
import { mapLink, rewriteBodyNext, rewriteLinkHeader } from '../../../plugins/mirror-links/rewrite.ts'

const mapping = { from: '/api/v1', to: '/ledger/mainnet/api/v1' }

t.test('mapLink: only links under the upstream prefix move; absolute links become relative', async (t) => {
  t.equal(mapLink('/api/v1/accounts?limit=2&account.id=gt:0.0.1002', mapping), '/ledger/mainnet/api/v1/accounts?limit=2&account.id=gt:0.0.1002')
  t.equal(mapLink('/api/v1', mapping), '/ledger/mainnet/api/v1')
  t.equal(mapLink('/api/v1?x=1', mapping), '/ledger/mainnet/api/v1?x=1')
  t.equal(mapLink('/api/v1x/accounts', mapping), undefined, 'a longer segment is not under the prefix')
  t.equal(mapLink('/api/v2/accounts', mapping), undefined)
  t.equal(mapLink('https://mainnet.example/api/v1/tokens?limit=1', mapping), '/ledger/mainnet/api/v1/tokens?limit=1')
  t.equal(mapLink('ftp://x/api/v1', mapping), undefined)
  t.equal(mapLink('accounts', mapping), undefined)
  t.equal(mapLink('/accounts?limit=1', { from: '', to: '/m' }), '/m/accounts?limit=1', 'an empty upstream prefix prefixes everything')
})

t.test('rewriteBodyNext: edits the text in place, keeps big integers and everything else byte for byte', async (t) => {
  const body = '{"accounts":[{"balance":{"balance":9223372036854775807},"memo":"see /api/v1/accounts"}],"links":{"next":"/api/v1/accounts?limit=1&account.id=gt:0.0.1001"}}'
  const out = rewriteBodyNext(Buffer.from(body), mapping)!.toString()
  t.equal(out, body.replace('"next":"/api/v1/', '"next":"/ledger/mainnet/api/v1/'))
  t.match(out, /9223372036854775807/, 'no JSON round trip')
  t.equal(rewriteBodyNext(Buffer.from('{"accounts":[],"links":{"next":null}}'), mapping), undefined, 'null next: unchanged')
  t.equal(rewriteBodyNext(Buffer.from('{"token_id":"0.0.1"}'), mapping), undefined, 'no links: unchanged')
  t.equal(rewriteBodyNext(Buffer.from('{"links":{"next":"/elsewhere"}}'), mapping), undefined, 'outside the prefix: unchanged')
  const spaced = '{\n  "links": { "next": "/api/v1/tokens?x=\\"q\\"" }\n}'
  t.equal(rewriteBodyNext(Buffer.from(spaced), mapping)!.toString(), '{\n  "links": { "next": "/ledger/mainnet/api/v1/tokens?x=\\"q\\"" }\n}', 'whitespace and escapes')
  const multibyte = '{"memo":"é€","links":{"next":"/api/v1/a"}}'
  t.equal(rewriteBodyNext(Buffer.from(multibyte), mapping)!.toString(), '{"memo":"é€","links":{"next":"/ledger/mainnet/api/v1/a"}}')
})

t.test('rewriteLinkHeader: every target under the prefix, other parts untouched', async (t) => {
  t.equal(rewriteLinkHeader('</api/v1/accounts?limit=2>; rel="next"', mapping), '</ledger/mainnet/api/v1/accounts?limit=2>; rel="next"')
  t.equal(
    rewriteLinkHeader('</api/v1/a?x=1>; rel="next", <https://docs.example/x>; rel="help"', mapping),
    '</ledger/mainnet/api/v1/a?x=1>; rel="next", <https://docs.example/x>; rel="help"',
  )
})
