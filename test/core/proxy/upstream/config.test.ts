/** gateway.yaml upstreams: the single-URL form unchanged, the pool form, and errors with file:line:col. */
import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '../../../../core/config/load.ts'
import { formatIssue } from '../../../../core/config/source.ts'
import { tempDir } from '../../../helpers/temp.ts'

const dir = tempDir('tollgate-upstream-config-')
let n = 0
async function load(upstreams: string) {
  const file = join(dir, `gateway-${++n}.yaml`)
  writeFileSync(file, `version: 1\nupstreams:\n${upstreams}\nroutes:\n  - { name: r, path: /r, upstream: u }\n`)
  const result = await loadConfig(file, {})
  return { ...result, messages: result.issues.map(formatIssue).map((m) => m.replace(/gateway-\d+\.yaml/, 'gateway.yaml')) }
}

t.test('a single URL is a pool of one that retries nothing and hedges nothing (today’s behaviour)', async (t) => {
  const { config, messages } = await load('  u: { url: "http://127.0.0.1:9/base" }')
  t.same(messages, [])
  const u = config!.upstreams.u
  t.equal(u.url, 'http://127.0.0.1:9/base')
  t.same(u.targets, [{ url: 'http://127.0.0.1:9/base', name: '0', weight: 1 }])
  t.equal(u.retry.maxRetries, 0)
  t.same(u.hedge, { afterMs: 0, percentile: 0 })
  t.equal(u.breaker.maxConcurrent, 0)
})

t.test('targets with names, weights and zones; a pool retries once by default', async (t) => {
  const { config, messages } = await load('  u:\n    targets:\n      - { url: "http://a:1", name: a, zone: eu }\n      - { url: "http://b:1", weight: 3 }\n    hedge: { percentile: 95 }')
  t.same(messages, [])
  const u = config!.upstreams.u
  t.same(u.targets, [{ url: 'http://a:1', name: 'a', weight: 1, zone: 'eu' }, { url: 'http://b:1', name: '1', weight: 3 }])
  t.equal(u.retry.maxRetries, 1)
  t.equal(u.retry.budgetPercent, 20)
  t.equal(u.hedge.percentile, 95)
})

t.test('errors name file:line:col and the field', async (t) => {
  const both = await load('  u:\n    url: "http://a:1"\n    targets: [{ url: "http://b:1" }]')
  t.match(both.messages.join("\n"), /gateway\.yaml:[34]:\d+ upstreams\.u.*exactly one of `url` or `targets`/)
  const neither = await load('  u: { connections: 4 }')
  t.match(neither.messages.join("\n"), /gateway\.yaml:[34]:\d+ upstreams\.u.*exactly one of `url` or `targets`/)
  const dup = await load('  u:\n    targets:\n      - { url: "http://a:1", name: x }\n      - { url: "http://b:1", name: x }')
  t.match(dup.messages.join('\n'), /gateway\.yaml:6:\d+ upstreams\.u\.targets\[1\]\.name.*duplicate target name "x"/)
  const weight = await load('  u:\n    targets: [{ url: "http://a:1", weight: 0 }]')
  t.match(weight.messages.join('\n'), /gateway\.yaml:4:\d+ upstreams\.u\.targets\[0\]\.weight/)
  const unknown = await load('  u:\n    url: "http://a:1"\n    retry: { attempts: 3 }')
  t.match(unknown.messages.join('\n'), /gateway\.yaml:5:\d+ upstreams\.u\.retry/)
  const zone = await load('  u:\n    preferZone: us\n    targets: [{ url: "http://a:1", zone: eu }]')
  t.match(zone.messages.join('\n'), /gateway\.yaml:4:\d+ upstreams\.u\.preferZone.*no target has zone "us"/)
  const balance = await load('  u:\n    balance: random\n    targets: [{ url: "http://a:1" }]')
  t.match(balance.messages.join('\n'), /gateway\.yaml:4:\d+ upstreams\.u\.balance/)
})

t.test('balance and preferZone', async (t) => {
  const { config, messages } = await load('  u:\n    balance: round-robin\n    preferZone: eu\n    targets: [{ url: "http://a:1", zone: eu }, { url: "http://b:1", zone: us }]')
  t.same(messages, [])
  t.equal(config!.upstreams.u.balance, 'round-robin')
  t.equal(config!.upstreams.u.preferZone, 'eu')
  const plain = await load('  u: { url: "http://a:1" }')
  t.equal(plain.config!.upstreams.u.balance, 'least-loaded', 'least-loaded by default')
})
