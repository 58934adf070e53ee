/**
 * core/proxy/http/client-address.ts: the client address behind trusted proxies, right to left through
 * X-Forwarded-For (the end-to-end attack is test/security/forwarded-for-spoof.test.ts).
 */
import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BlockList } from 'node:net'
import type { IncomingMessage } from 'node:http'
import { addTrustedProxy, proxyTrust } from '../../../../core/proxy/http/client-address.ts'
import { loadConfig } from '../../../../core/config/load.ts'
import { tempDir } from '../../../helpers/temp.ts'

const req = (peer: string, xff?: string) => ({ socket: { remoteAddress: peer }, headers: xff === undefined ? {} : { 'x-forwarded-for': xff } }) as unknown as IncomingMessage

t.test('false: the peer, whatever the header says', async (t) => {
  const trust = proxyTrust(false)
  t.equal(trust.clientIp(req('203.0.113.9', '1.1.1.1')), '203.0.113.9')
  t.notOk(trust.trustsPeer('127.0.0.1'))
})

t.test('a list: the right-most address that is not a trusted proxy', async (t) => {
  const trust = proxyTrust(['10.0.0.0/8', '192.0.2.7'])
  t.equal(trust.clientIp(req('10.0.0.2', '6.6.6.6, 198.51.100.4, 192.0.2.7')), '198.51.100.4', 'forged left part ignored')
  t.equal(trust.clientIp(req('10.0.0.2', '6.6.6.6,198.51.100.4')), '198.51.100.4', 'no spaces')
  t.equal(trust.clientIp(req('203.0.113.9', '6.6.6.6')), '203.0.113.9', 'an untrusted peer: its header is ignored')
  t.equal(trust.clientIp(req('10.0.0.2')), '10.0.0.2', 'a trusted peer without the header')
  t.equal(trust.clientIp(req('10.0.0.2', '10.1.1.1, 10.2.2.2')), '10.1.1.1', 'all trusted: the left-most')
  t.equal(trust.clientIp(req('::ffff:10.0.0.2', '198.51.100.4')), '198.51.100.4', 'IPv4-mapped peer')
  t.equal(trust.clientIp(req('10.0.0.2', 'garbage, 10.3.3.3')), '10.3.3.3', 'a non-address ends the walk at the last trusted hop')
  t.equal(trust.clientIp(req('10.0.0.2', '198.51.100.4:5555')), '198.51.100.4', 'an IPv4 entry with a port')
  t.ok(trust.trustsPeer('10.9.9.9'))
  t.notOk(trust.trustsPeer('11.0.0.1'))
})

t.test('true: loopback, private and link-local proxies', async (t) => {
  const trust = proxyTrust(true)
  t.equal(trust.clientIp(req('127.0.0.1', '6.6.6.6, 198.51.100.4')), '198.51.100.4')
  t.equal(trust.clientIp(req('::1', '6.6.6.6, 192.168.1.1, 198.51.100.4, fd00::1')), '198.51.100.4')
  t.equal(trust.clientIp(req('198.51.100.4', '127.0.0.1')), '198.51.100.4', 'a public peer cannot claim loopback')
})

t.test('a hop count: the n-th address from the right', async (t) => {
  t.equal(proxyTrust(1).clientIp(req('203.0.113.9', '6.6.6.6, 198.51.100.4')), '198.51.100.4')
  t.equal(proxyTrust(2).clientIp(req('203.0.113.9', '6.6.6.6, 198.51.100.4, 192.0.2.1')), '198.51.100.4')
  t.equal(proxyTrust(3).clientIp(req('203.0.113.9', '198.51.100.4')), '198.51.100.4', 'fewer entries than hops: the left-most')
  t.equal(proxyTrust(1).clientIp(req('203.0.113.9')), '203.0.113.9')
})

t.test('config entries', async (t) => {
  const list = new BlockList()
  t.equal(addTrustedProxy(list, '10.0.0.0/8'), undefined)
  t.equal(addTrustedProxy(list, 'fd00::/8'), undefined)
  t.equal(addTrustedProxy(list, 'private'), undefined)
  t.match(addTrustedProxy(list, '10.0.0.0/33'), /prefix length outside 0\.\.32/)
  t.match(addTrustedProxy(list, 'proxy.internal'), /not an IP address, a CIDR or one of loopback, private, linklocal/)
  t.match(addTrustedProxy(list, '10.0.0.0/x'), /prefix length/)
})

t.test('gateway.yaml: a bad entry is a config error naming it; true, numbers and lists load', async (t) => {
  const dir = tempDir('tollgate-trust-')
  const load = async (trustProxy: string) => {
    const file = join(dir, 'gateway.yaml')
    writeFileSync(file, `version: 1\nserver: { trustProxy: ${trustProxy} }\nupstreams: { u: { url: 'http://127.0.0.1:9' } }\nroutes: [{ name: r, path: /r, upstream: u }]\n`)
    return loadConfig(file, {})
  }
  const bad = await load('[10.0.0.0/8, 10.0.0.0/40]')
  t.equal(bad.config, undefined)
  t.match(bad.issues, [{ path: ['server', 'trustProxy', 1], message: /prefix length outside 0\.\.32/ }])
  t.ok((await load('0')).issues.length > 0, 'a hop count of 0 is refused (false says that)')
  t.same((await load('true')).config?.server.trustProxy, true)
  t.same((await load('2')).config?.server.trustProxy, 2)
  t.same((await load('[loopback, 10.1.0.0/16, "::1"]')).config?.server.trustProxy, ['loopback', '10.1.0.0/16', '::1'])
  t.same((await load('false')).config?.server.trustProxy, false)
})
