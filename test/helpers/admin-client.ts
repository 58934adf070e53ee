/**
 * Admin API calls of the accounts tests: JSON in and out, a cookie jar of one session, and
 * `tollgate user add` run as a process with the password on stdin.
 */
import { spawn } from 'node:child_process'
import { request } from 'undici'
import { BIN } from './gateway-process.ts'

export interface Answer {
  status: number
  text: string
  json: any
  headers: Record<string, string | string[] | undefined>
}

export async function send(base: string, method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> {
  const res = await request(base + path, {
    method: method as 'GET',
    headers: { ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers },
    body: options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body),
  })
  const text = await res.body.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: res.statusCode, text, json, headers: res.headers }
}

/** A signed-in browser, as far as the admin API can tell: the session cookie and its CSRF token. */
export interface Session {
  cookie: string
  csrf: string
  /** A call with the cookie (and, unless `csrf: false`, the CSRF header). */
  call(method: string, path: string, body?: unknown, options?: { csrf?: boolean | string; headers?: Record<string, string> }): Promise<Answer>
}

export async function signIn(adminUrl: string, email: string, password: string): Promise<Session> {
  const answer = await send(adminUrl, 'POST', '/admin/session', { body: { email, password } })
  if (answer.status !== 200) throw new Error(`sign-in of ${email} answered ${answer.status}: ${answer.text}`)
  const setCookie = String(answer.headers['set-cookie'])
  const cookie = setCookie.split(';')[0]
  const csrf = answer.json.csrfToken as string
  return {
    cookie,
    csrf,
    call(method, path, body, options = {}) {
      const headers: Record<string, string> = { cookie, ...options.headers }
      if (options.csrf !== false) headers['x-csrf-token'] = typeof options.csrf === 'string' ? options.csrf : csrf
      return send(adminUrl, method, path, { body, headers })
    },
  }
}

/** Runs `tollgate user ARGS -c FILE` with `stdin` piped in; resolves with its exit code and output. */
export function userCli(configFile: string, args: string[], stdin: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'user', ...args, '-c', configFile], { stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
    child.stdin.end(stdin)
  })
}
