/**
 * Issue 25, finding 6: credentials leaked to upstreams, and upstreams could set our cookies. The
 * forwarder sent the client's `Authorization` and the gateway's own cookies (`tollgate_session`:
 * the admin session; `tollgate_ws`: the workstation session; `tollgate_link`) to every upstream,
 * which could then act as the user on the admin API or a workstation; and an upstream's
 * `Set-Cookie` reached the client, so an upstream could plant a `tollgate_session` of its choice.
 *
 * The rule: gateway cookies and the client's Authorization are never forwarded unless the route
 * opts in (`forwardGatewayCookies`, `forwardAuthorization`); an upstream's Set-Cookie is dropped
 * unless the route opts in (`passSetCookie`). The client's other cookies go through, and an
 * Authorization a plugin sets for the upstream (upstream credentials) is always sent.
 * Against a real gateway process and a stand-in upstream that records what it received.
 */
import t from 'tap'
import { request } from 'undici'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'

const STAMP_PLUGIN = new URL('../../examples/plugins/response-stamp/index.ts', import.meta.url).pathname
const CLIENT_COOKIES = 'tollgate_session=admin-session-token; theme=dark; tollgate_ws=workstation-token; tollgate_link=link-binding; lang=en'
const CLIENT_AUTH = 'Bearer client-credential-for-the-gateway'

let up: TestUpstream
let gw: GatewayProcess

t.before(async () => {
  up = await startTestUpstream()
  gw = await startGatewayProcess(`
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 } }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
customPlugins:
  - path: ${STAMP_PLUGIN}
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: plain
    path: /plain/*rest
    upstream: echo
  - name: with-response-plugin
    path: /stamped/*rest
    upstream: echo
    plugins:
      - { name: response-stamp, config: { value: on } }
  - name: buffered
    path: /buffered/*rest
    upstream: echo
    plugins:
      - { name: response-cache, config: {} }
  - name: upstream-credential
    path: /upstream-cred/*rest
    upstream: echo
    plugins:
      - { name: response-stamp, config: { value: on, upstreamHeader: authorization } }
  - name: opted-in
    path: /opted/*rest
    upstream: echo
    forwardAuthorization: true
    forwardGatewayCookies: true
    passSetCookie: true
`, { startTimeoutMs: 90_000 })
})

t.teardown(async () => {
  await gw?.stop()
  await up?.close()
})

async function call(path: string): Promise<{ status: number; setCookie: string[]; received: TestUpstream['received'][number] }> {
  const before = up.received.length
  const res = await request(gw.url + path, { headers: { authorization: CLIENT_AUTH, cookie: CLIENT_COOKIES } })
  await res.body.text()
  const raw = res.headers['set-cookie']
  const setCookie = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw]
  t.equal(up.received.length, before + 1, `${path} reached the upstream once`)
  return { status: res.statusCode, setCookie, received: up.received[before]! }
}

t.test('a default route keeps the gateway credentials from the upstream', async (t) => {
  for (const prefix of ['/plain', '/stamped', '/buffered']) {
    const { status, received } = await call(`${prefix}/echo?n=${Math.random()}`)
    t.equal(status, 200)
    t.equal(received.headers.authorization, undefined, `${prefix}: the client's Authorization is not forwarded`)
    t.equal(received.headers.cookie, 'theme=dark; lang=en', `${prefix}: no tollgate_* cookie is forwarded; the client's others are`)
  }
  const onlyOurs = await request(gw.url + '/plain/echo', { headers: { cookie: 'tollgate_session=s; tollgate_ws=w' } })
  await onlyOurs.body.text()
  t.equal(up.received.at(-1)!.headers.cookie, undefined, 'a Cookie header of only gateway cookies is not sent at all')
})

t.test("a default route drops the upstream's Set-Cookie", async (t) => {
  for (const prefix of ['/plain', '/stamped', '/buffered']) {
    const { status, setCookie } = await call(`${prefix}/set-cookie`)
    t.equal(status, 200)
    t.same(setCookie, [], `${prefix}: the upstream cannot set cookies on the gateway's origin`)
  }
  // The cache still saw the cookie: it must not store (and replay) an answer that set one.
  const again = await call('/buffered/set-cookie')
  t.same(again.setCookie, [])
})

t.test('an Authorization a plugin sets for the upstream is still sent', async (t) => {
  const { received } = await call('/upstream-cred/echo')
  t.equal(received.headers.authorization, 'upstream-credential', "the plugin's value, not the client's")
  t.equal(received.headers.cookie, 'theme=dark; lang=en')
})

t.test('a route that opts in forwards and passes them', async (t) => {
  const { received } = await call('/opted/echo')
  t.equal(received.headers.authorization, CLIENT_AUTH)
  t.equal(received.headers.cookie, CLIENT_COOKIES)
  const { setCookie } = await call('/opted/set-cookie')
  t.same(setCookie, ['tollgate_session=forged-by-upstream; Path=/; HttpOnly', 'upstream_pref=dark; Path=/'])
})
