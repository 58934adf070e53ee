/**
 * The public workstation routes' refusals and pages over a real socket: a browser tab (navigation)
 * gets a page styled like the dashboard (its stylesheet from this listener, strict CSP, the message
 * escaped, the stable code, a next step), a client keeps the JSON; the "Identity linked" page
 * carries the stylesheet and a next step; only the stylesheet and icon are served as assets.
 */
import t from 'tap'
import { createServer } from 'node:http'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { STANDALONE_POLICY } from '../../../core/dashboard/layout.ts'
import { linkedPage, publicAsset, sendRefusal } from '../../../core/workstations/sign-in-cookies.ts'

t.test('refusals negotiate: a page for a browser tab, JSON for a client', async (t) => {
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname
    if (path === '/workstations/_auth/linked') return linkedPage(res)
    if (publicAsset(res, path)) return
    sendRefusal(res, 409, 'workstation_not_running', 'the workstation of <b>p1</b> is stopped: start it first')
  }).listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  const tab = await request(`${base}/workstations/p1/`, { headers: { 'sec-fetch-mode': 'navigate', accept: 'text/html,*/*' } })
  const page = await tab.body.text()
  t.equal(tab.statusCode, 409)
  t.match(tab.headers['content-type'], /^text\/html/)
  t.equal(tab.headers['content-security-policy'], STANDALONE_POLICY)
  t.match(page, /<html lang="en">/)
  t.match(page, /<link rel="stylesheet" href="\/workstations\/_auth\/assets\/app.css">/, "the dashboard's stylesheet")
  t.match(page, /<h1>Not possible now<\/h1>/)
  t.match(page, /The workstation of &lt;b&gt;p1&lt;\/b&gt; is stopped: start it first <span class="muted">\(409 <code>workstation_not_running<\/code>\)<\/span>/, 'the message escaped, with its code')
  t.match(page, /Workstation card[\s\S]*<a href="\/workstations\/p1\/">try this address again<\/a>/, 'a next step')
  t.notMatch(page, /<script/, 'no script')

  const client = await request(`${base}/workstations/p1/`, { headers: { accept: 'application/json' } })
  t.match(client.headers['content-type'], /^application\/json/)
  t.same(await client.body.json(), { error: { code: 'workstation_not_running', message: 'the workstation of <b>p1</b> is stopped: start it first' } }, 'clients keep the JSON')
  const plain = await request(`${base}/workstations/p1/`)
  t.match(plain.headers['content-type'], /^application\/json/, 'a client that asks for nothing in particular too')
  await plain.body.dump()

  const linked = await request(`${base}/workstations/_auth/linked`)
  const linkedText = await linked.body.text()
  t.equal(linked.headers['content-security-policy'], STANDALONE_POLICY)
  t.match(linkedText, /<link rel="stylesheet" href="\/workstations\/_auth\/assets\/app.css">[\s\S]*<h1>Identity linked<\/h1>[\s\S]*<form method="get" action="\/workstations\/_auth\/login">/)
  const css = await request(`${base}/workstations/_auth/assets/app.css`)
  t.equal(css.statusCode, 200)
  t.match(css.headers['content-type'], /^text\/css/)
  t.match(await css.body.text(), /\.card \{/)
  const script = await request(`${base}/workstations/_auth/assets/app.js`, { headers: { accept: 'application/json' } })
  t.equal(script.statusCode, 409, "the dashboard's script is not served here (the request goes on as any other path)")
  await script.body.dump()
})
