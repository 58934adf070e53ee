/**
 * Drives a browser's OpenID Connect sign-in over plain HTTP: follows redirects from `startUrl`
 * through the gateway and the local provider (examples/oidc-provider.ts), answers its login and
 * consent pages as account `accountId`, and returns the gateway's session cookie. Cookies are kept
 * per origin, as a browser would.
 */
import { request } from 'undici'

export async function signInThroughOidc(startUrl: string, accountId: string, callbackCookie?: string): Promise<{ cookie: string; landedAt: string }> {
  const jars = new Map<string, Map<string, string>>()
  const jarOf = (url: URL) => {
    let jar = jars.get(url.origin)
    if (!jar) jars.set(url.origin, (jar = new Map()))
    return jar
  }
  let url = new URL(startUrl)
  let method: 'GET' | 'POST' = 'GET'
  let body: string | undefined
  let gatewayCookie = ''
  for (let hop = 0; hop < 20; hop++) {
    const jar = jarOf(url)
    const headers: Record<string, string> = { accept: 'text/html' }
    const cookies = [...jar].map(([k, v]) => `${k}=${v}`)
    // A browser sends the gateway's cookies by host, whatever the port: the link cookie the admin listener set.
    if (callbackCookie && url.pathname.startsWith('/workstations/_auth/')) cookies.push(callbackCookie)
    if (cookies.length) headers.cookie = cookies.join('; ')
    if (body) headers['content-type'] = 'application/x-www-form-urlencoded'
    const answer = await request(url, { method, headers, body })
    for (const line of ([] as string[]).concat(answer.headers['set-cookie'] ?? [])) {
      const [pair] = line.split(';')
      const [name, ...value] = pair.split('=')
      jar.set(name.trim(), value.join('='))
      if (name.trim() === 'tollgate_ws') gatewayCookie = `tollgate_ws=${value.join('=')}`
    }
    const text = await answer.body.text()
    method = 'GET'
    body = undefined
    if (answer.statusCode >= 300 && answer.statusCode < 400) {
      url = new URL(String(answer.headers.location), url)
      continue
    }
    if (url.pathname.startsWith('/interaction/')) {
      // The provider's login page (prompt=login) or consent page (prompt=consent).
      const prompt = /name="prompt" value="(\w+)"/.exec(text)?.[1]
      if (!prompt) throw new Error(`unexpected provider page at ${url}: ${text.slice(0, 200)}`)
      method = 'POST'
      body = new URLSearchParams(prompt === 'login' ? { prompt, login: accountId, password: 'unused' } : { prompt }).toString()
      continue
    }
    if (!gatewayCookie) {
      // The refusal's stable code: from the JSON a client gets, or the page a browser gets.
      const code = /"code":"(\w+)"/.exec(text)?.[1] ?? /\(\d{3} <code>(\w+)<\/code>\)/.exec(text)?.[1] ?? ''
      throw new Error(`sign-in ended at ${url} with ${answer.statusCode} ${code} and no session: ${text.slice(0, 300)}`)
    }
    return { cookie: gatewayCookie, landedAt: url.toString() }
  }
  throw new Error('too many redirects')
}
