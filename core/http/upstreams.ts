/**
 * One undici keep-alive Pool per upstream. Pools survive reloads when an upstream's definition is
 * unchanged, so a reload never drops warm connections.
 */
import { Pool } from 'undici'

export interface UpstreamConfig {
  /** Base URL: scheme, host, port and an optional path prefix. */
  url: string
  /** Max sockets in the pool. */
  connections: number
  timeouts: { connectMs: number; headersMs: number; bodyMs: number }
  keepAliveTimeoutMs: number
}

/** What a plugin (or the forwarder) holds to talk to one upstream. */
export interface UpstreamHandle {
  readonly name: string
  readonly origin: string
  /** Path prefix of the upstream URL, without a trailing slash ('' for none). */
  readonly basePath: string
  readonly pool: Pool
  readonly config: UpstreamConfig
}

function fingerprint(config: UpstreamConfig): string {
  return JSON.stringify(config)
}

export function createUpstream(name: string, config: UpstreamConfig): UpstreamHandle {
  const url = new URL(config.url)
  const pool = new Pool(url.origin, {
    connections: config.connections,
    connect: { timeout: config.timeouts.connectMs },
    headersTimeout: config.timeouts.headersMs,
    bodyTimeout: config.timeouts.bodyMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    pipelining: 1,
  })
  return { name, origin: url.origin, basePath: url.pathname.replace(/\/+$/, ''), pool, config }
}

/**
 * Builds the upstream set for a new config, reusing the pools of upstreams whose definition did
 * not change. Returns the new set and the handles that are no longer used (to be closed once the
 * requests still running on the old table are done).
 */
export function reconcileUpstreams(
  previous: ReadonlyMap<string, UpstreamHandle>,
  wanted: Readonly<Record<string, UpstreamConfig>>,
): { current: Map<string, UpstreamHandle>; retired: UpstreamHandle[] } {
  const current = new Map<string, UpstreamHandle>()
  for (const [name, config] of Object.entries(wanted)) {
    const old = previous.get(name)
    current.set(name, old && fingerprint(old.config) === fingerprint(config) ? old : createUpstream(name, config))
  }
  const retired = [...previous.values()].filter((handle) => current.get(handle.name) !== handle)
  return { current, retired }
}
