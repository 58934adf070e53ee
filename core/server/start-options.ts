/**
 * What a gateway is started with and what its start and reload answer (core/server/gateway.ts
 * re-exports them), and the listen step both of its listeners share.
 */
import type { Server } from 'node:http'
import type { Store } from '../store/types.ts'

export class ConfigError extends Error {
  readonly issues: string[]
  constructor(issues: string[]) {
    super(`invalid config:\n${issues.join('\n')}`)
    this.issues = issues
  }
}

export interface StartOptions {
  configFile: string
  env?: NodeJS.ProcessEnv
  /** Override listen ports (tests use 0). */
  port?: number
  adminPort?: number
  host?: string
  /** Override the admin listener's host (a worker's private admin listener is on loopback). */
  adminHost?: string
  /** Capture logs (tests). */
  logDestination?: NodeJS.WritableStream
  /** Watch the config file for changes (default: the config's `watch`). */
  watch?: boolean
  /** Use this store instead of opening the config's (a cluster worker's proxy to the primary's store). */
  store?: Store
  /**
   * Run as one worker of `tollgate start --workers`: the public listener is shared through
   * node:cluster, the admin listener is this worker's own (exclusive, so the primary can reach each
   * worker), and the start line reads `tollgate worker started`.
   */
  worker?: boolean
}

export interface ReloadResult {
  ok: boolean
  issues: string[]
}

/** `exclusive`: in a cluster worker, bind a port of its own instead of sharing the primary's handle. */
export function listen(server: Server, port: number, host: string, exclusive = false): Promise<void> {
  return new Promise((resolveListen, reject) => {
    server.once('error', reject)
    server.listen({ port, host, exclusive }, () => {
      server.off('error', reject)
      resolveListen()
    })
  })
}

