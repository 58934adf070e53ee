/** Raw HTTP helpers for tests: node:http sends paths exactly as given (fetch would normalise them). */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'

export interface RawResponse {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

export function rawRequest(
  base: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer | (string | Buffer)[]; chunked?: boolean } = {},
): Promise<RawResponse> {
  const url = new URL(base)
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, path, method: options.method ?? 'GET', headers: options.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c) => chunks.push(c))
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }))
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    const parts = options.body === undefined ? [] : Array.isArray(options.body) ? options.body : [options.body]
    if (options.chunked) req.setHeader('transfer-encoding', 'chunked')
    for (const part of parts) req.write(part)
    req.end()
  })
}

export function json(response: RawResponse): any {
  return JSON.parse(response.body)
}
