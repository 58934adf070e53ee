/**
 * The dashboard's static files: our own app.js and app.css (core/dashboard/assets/) and uPlot's
 * build from the installed `uplot` package (no CDN). Read once, served with a strong ETag.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { ServerResponse } from 'node:http'

const here = dirname(fileURLToPath(import.meta.url))
const uplotDist = () => dirname(createRequire(import.meta.url).resolve('uplot'))

const FILES: Record<string, { path: () => string; type: string }> = {
  'app.js': { path: () => join(here, 'assets', 'app.js'), type: 'text/javascript; charset=utf-8' },
  'favicon.svg': { path: () => join(here, 'assets', 'favicon.svg'), type: 'image/svg+xml' },
  'app.css': { path: () => join(here, 'assets', 'app.css'), type: 'text/css; charset=utf-8' },
  'uPlot.iife.min.js': { path: () => join(uplotDist(), 'uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' },
  'uPlot.min.css': { path: () => join(uplotDist(), 'uPlot.min.css'), type: 'text/css; charset=utf-8' },
}

const cache = new Map<string, { body: Buffer; etag: string; type: string }>()

/** Serves one asset; answers true (a 404 for an unknown name). */
export function serveAsset(res: ServerResponse, name: string, headers: Record<string, string>): boolean {
  const file = FILES[name]
  if (!file) {
    res.writeHead(404, { ...headers, 'content-type': 'text/plain; charset=utf-8' }).end('not found')
    return true
  }
  let entry = cache.get(name)
  if (!entry) {
    const body = readFileSync(file.path())
    entry = { body, etag: '"' + createHash('sha256').update(body).digest('base64url').slice(0, 22) + '"', type: file.type }
    cache.set(name, entry)
  }
  const ifNoneMatch = res.req?.headers['if-none-match']
  const common = { ...headers, 'cache-control': 'no-cache', etag: entry.etag }
  if (ifNoneMatch === entry.etag) {
    res.writeHead(304, common).end()
    return true
  }
  res.writeHead(200, { ...common, 'content-type': entry.type, 'content-length': String(entry.body.length) })
  res.end(res.req?.method === 'HEAD' ? undefined : entry.body)
  return true
}
