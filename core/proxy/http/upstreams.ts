/**
 * The named upstreams of a config: one UpstreamPool (core/proxy/upstream/) each, with one undici
 * keep-alive Pool per target. Pools survive reloads when an upstream's definition is unchanged, so
 * a reload never drops warm connections nor the health the gateway learned.
 */
import { normaliseUpstream, type RawUpstream, type UpstreamConfig } from '../upstream/config.ts'
import { UpstreamPool } from '../upstream/pool.ts'

export type { UpstreamConfig }

/** What a plugin (or the forwarder) holds to talk to one upstream. */
export type UpstreamHandle = UpstreamPool

function fingerprint(config: UpstreamConfig): string {
  return JSON.stringify(config)
}

/** Accepts the normalised config, or the single-URL shape (`{ url, connections, ... }`) tests build by hand. */
export function createUpstream(name: string, config: UpstreamConfig | RawUpstream): UpstreamHandle {
  const full = 'targets' in config && config.targets && 'health' in config && (config as UpstreamConfig).retry ? (config as UpstreamConfig) : normaliseUpstream(config as RawUpstream)
  return new UpstreamPool(name, full)
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
