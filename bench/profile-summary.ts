/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): where the busy time goes, by
 * file:function, self and inclusive, with the project's own files (core/, plugins/) called out.
 *
 * With the number of requests the process served, each entry is also given in µs per request.
 *
 * Usage: node --import tsx bench/profile-summary.ts FILE.cpuprofile [--top 25] [--requests N]
 *          [--against OTHER.cpuprofile --against-requests M]   (µs/request differences, FILE − OTHER)
 */
import { readFileSync, statSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { argValue } from './lib/args.ts'
import { tsxSourceMapper, type PositionMapper } from './lib/tsx-source-maps.ts'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number }
  children?: number[]
}

interface CpuProfile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

const ROOT = fileURLToPath(new URL('../', import.meta.url))
/** Checkouts beside this one (a revision the benches unpacked): their files are named like ours, so profiles of the two compare by function. */
const otherRoots: string[] = []
export function addSourceRoot(dir: string): void {
  otherRoots.push(dir.endsWith('/') ? dir : dir + '/')
}
const IDLE = new Set(['(idle)', '(program)', '(root)'])

function keyOf(node: ProfileNode, mapLine: PositionMapper): string {
  const { functionName, url, lineNumber, columnNumber } = node.callFrame
  const path = url.replace(/^file:\/\//, '')
  let file = path.replace(ROOT, '')
  for (const root of otherRoots) file = file.replace(root, '')
  file = file.replace(/^.*node_modules\//, 'node_modules/')
  const line = path.endsWith('.ts') ? (mapLine(path, lineNumber, columnNumber) ?? lineNumber + 1) : lineNumber + 1
  return `${file || '(native)'}:${functionName || '(anonymous)'}${file && lineNumber >= 0 ? `@${line}` : ''}`
}

/**
 * Self and inclusive µs by file:function, over busy samples from the first request on (idle and
 * program time excluded).
 */
export function profileShares(profile: CpuProfile, mapLine: PositionMapper = () => undefined): { busyUs: number; self: Map<string, number>; inclusive: Map<string, number> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const keys = new Map(profile.nodes.map((n) => [n.id, keyOf(n, mapLine)]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const self = new Map<string, number>()
  const inclusive = new Map<string, number>()
  // Start at the first request, so module loading and config building are not charged to requests.
  const serving = (id: number | undefined): boolean => {
    for (; id !== undefined; id = parent.get(id)) if (byId.get(id)!.callFrame.functionName === 'parserOnIncoming') return true
    return false
  }
  let first = profile.samples.findIndex((id) => serving(id))
  if (first < 0) first = 0
  let busyUs = 0
  for (let i = first; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i])!
    const delta = profile.timeDeltas[i] ?? 0
    if (IDLE.has(node.callFrame.functionName)) continue
    busyUs += delta
    const key = keys.get(node.id)!
    self.set(key, (self.get(key) ?? 0) + delta)
    const seen = new Set<string>()
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const k = keys.get(id)!
      if (seen.has(k)) continue
      seen.add(k)
      inclusive.set(k, (inclusive.get(k) ?? 0) + delta)
    }
  }
  return { busyUs, self, inclusive }
}

/** Busy time by area: the project's code, undici, Node's http, prom-client, GC, native calls. */
function areaOf(key: string): string {
  if (key.startsWith('core/') || key.startsWith('plugins/')) return key.split(':')[0]
  if (key.startsWith('node_modules/')) return key.split('/').slice(0, key.startsWith('node_modules/@') ? 3 : 2).join('/')
  if (key.startsWith('node:')) return key.split(':').slice(0, 2).join(':')
  if (key.startsWith('(native):(garbage collector)')) return '(garbage collector)'
  if (key.startsWith('(native)')) return '(native calls: syscalls, string encoding)'
  return key.split(':')[0]
}

function top(map: Map<string, number>, busyUs: number, count: number, requests: number | undefined, filter: (key: string) => boolean = () => true): string {
  return [...map]
    .filter(([key]) => filter(key))
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([key, us]) => `| ${key} | ${((100 * us) / busyUs).toFixed(1)}% |${requests ? ` ${(us / requests).toFixed(2)} |` : ''}`)
    .join('\n')
}

/** Markdown summary of one profile; `requests` (served by the process) adds µs/request columns. */
export function summariseProfile(file: string, options: { top?: number; requests?: number } = {}): string {
  const count = options.top ?? 25
  const requests = options.requests
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const { busyUs, self, inclusive } = profileShares(profile, tsxSourceMapper(statSync(file).mtimeMs))
  const areas = new Map<string, number>()
  for (const [key, us] of self) areas.set(areaOf(key), (areas.get(areaOf(key)) ?? 0) + us)
  const ours = (key: string) => key.startsWith('core/') || key.startsWith('plugins/')
  const head = (what: string) => [`| ${what} | share |${requests ? ' µs/req |' : ''}`, `|---|---:|${requests ? '---:|' : ''}`]
  return [
    `busy time ${(busyUs / 1e6).toFixed(2)} s (from the first request on; idle excluded)${requests ? `, ${requests} requests served: ${(busyUs / requests).toFixed(1)} µs/req` : ''}`,
    '',
    '### Self time by area',
    '',
    ...head('area'),
    top(areas, busyUs, count, requests),
    '',
    '### Self time, all code',
    '',
    ...head('file:function'),
    top(self, busyUs, count, requests),
    '',
    '### Inclusive time, core/ and plugins/',
    '',
    ...head('file:function'),
    top(inclusive, busyUs, count, requests, ours),
    '',
    '### Self time, core/ and plugins/',
    '',
    ...head('file:function'),
    top(self, busyUs, count, requests, ours),
  ].join('\n')
}

function loadShares(file: string) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  return profileShares(profile, tsxSourceMapper(statSync(file).mtimeMs))
}

/**
 * Where one process spends more per request than another (e.g. tollgate against the bare undici
 * proxy): self µs/request by area and by file:function, largest differences first.
 */
export function compareProfiles(file: string, requests: number, other: string, otherRequests: number, count = 25): string {
  const a = loadShares(file)
  const b = loadShares(other)
  const byArea = (self: Map<string, number>) => {
    const areas = new Map<string, number>()
    for (const [key, us] of self) areas.set(areaOf(key), (areas.get(areaOf(key)) ?? 0) + us)
    return areas
  }
  // Without line numbers: the same function of two revisions often sits on another line.
  const byFunction = (self: Map<string, number>) => {
    const functions = new Map<string, number>()
    for (const [key, us] of self) {
      const name = key.replace(/@\d+$/, '')
      functions.set(name, (functions.get(name) ?? 0) + us)
    }
    return functions
  }
  const table = (left: Map<string, number>, right: Map<string, number>) =>
    [...new Set([...left.keys(), ...right.keys()])]
      .map((key) => ({ key, l: (left.get(key) ?? 0) / requests, r: (right.get(key) ?? 0) / otherRequests }))
      .sort((x, y) => Math.abs(y.l - y.r) - Math.abs(x.l - x.r))
      .slice(0, count)
      .map(({ key, l, r }) => `| ${key} | ${l.toFixed(2)} | ${r.toFixed(2)} | ${(l - r >= 0 ? '+' : '') + (l - r).toFixed(2)} |`)
      .join('\n')
  const head = ['| what | this µs/req | other µs/req | difference |', '|---|---:|---:|---:|']
  return [
    `busy µs/request: ${(a.busyUs / requests).toFixed(1)} here, ${(b.busyUs / otherRequests).toFixed(1)} in the other (${(a.busyUs / requests - b.busyUs / otherRequests).toFixed(1)} more)`,
    '',
    '### Self time by area',
    '',
    ...head,
    table(byArea(a.self), byArea(b.self)),
    '',
    '### Self time by file:function',
    '',
    ...head,
    table(byFunction(a.self), byFunction(b.self)),
  ].join('\n')
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const file = process.argv[2]
  if (!file) {
    console.error('usage: node --import tsx bench/profile-summary.ts FILE.cpuprofile [--top 25] [--requests N]')
    process.exit(2)
  }
  const requests = argValue(process.argv, 'requests')
  const against = argValue(process.argv, 'against')
  if (against) {
    const otherRequests = argValue(process.argv, 'against-requests')
    if (!requests || !otherRequests) {
      console.error('--against needs --requests and --against-requests')
      process.exit(2)
    }
    console.log(compareProfiles(file, Number(requests), against, Number(otherRequests), Number(argValue(process.argv, 'top') ?? 25)))
    process.exit(0)
  }
  console.log(summariseProfile(file, { top: Number(argValue(process.argv, 'top') ?? 25), requests: requests ? Number(requests) : undefined }))
}
