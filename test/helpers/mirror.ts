/** HTTP helpers for the mirror proxy e2e tests: GETs with an API key, link walking, usage reads. */
import { request } from 'undici'

export interface MirrorAnswer {
  status: number
  headers: Record<string, string | string[] | undefined>
  text: string
  json: any
}

/** GET `base + path`, with `x-api-key` when a key is given. */
export async function mirrorGet(base: string, path: string, key?: string, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<MirrorAnswer> {
  const res = await request(base + path, { headers: key === undefined ? headers : { 'x-api-key': key, ...headers }, signal })
  const text = await res.body.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: res.statusCode, headers: res.headers, text, json }
}

/** Follows `links.next` from `path` until it is null; returns every page's answer. */
export async function followNext(base: string, path: string, key?: string, maxPages = 30): Promise<MirrorAnswer[]> {
  const pages: MirrorAnswer[] = []
  let next: string | null = path
  while (next !== null) {
    const answer = await mirrorGet(base, next, key)
    if (answer.status !== 200) throw new Error(`${next} answered ${answer.status}: ${answer.text}`)
    pages.push(answer)
    next = answer.json.links.next
    if (pages.length > maxPages) throw new Error(`pagination from ${path} does not end`)
  }
  return pages
}

/** Credits a project used in its current period, from the admin usage endpoint. */
export async function creditsUsed(adminUrl: string, adminToken: string, project: string): Promise<number> {
  const res = await request(`${adminUrl}/admin/projects/${project}/usage?granularity=hour`, { headers: { authorization: `Bearer ${adminToken}` } })
  const body = (await res.body.json()) as { balance: { used: number } }
  return body.balance.used
}

/** The value of one sample of a Prometheus text exposition, or 0 when absent. */
export async function metricValue(adminUrl: string, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await request(`${adminUrl}/metrics`)).body.text()
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`)
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue
    const inner = line.slice(name.length + 1, line.indexOf('}'))
    if (wanted.every((pair) => inner.split(',').includes(pair))) return Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return 0
}
