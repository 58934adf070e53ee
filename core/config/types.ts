/** gateway.yaml after validation and defaults: what the builder consumes. */
import type { UpstreamConfig } from '../proxy/upstream/config.ts'
import type { TrustProxySetting } from '../proxy/http/client-address.ts'
import type { PluginDefinition } from '../proxy/plugin.ts'
import type { ConfigPath } from './source.ts'

export interface PluginEntry {
  name: string
  config: Record<string, unknown>
  enabled: boolean
  /** Where the entry sits in gateway.yaml, for build errors. */
  path: ConfigPath
  definition: PluginDefinition
}

export interface RouteConfig {
  name: string
  methods: string[]
  path: string
  upstream?: string
  rewrite?: string
  handler?: PluginEntry
  apiType?: string
  errorFormat: string
  maxBodyBytes?: number
  bodyTimeoutMs?: number
  maxResponseBodyBytes: number
  /** Send the client's Authorization header upstream (default no). */
  forwardAuthorization?: boolean
  /** Send the gateway's own tollgate_* cookies upstream (default no). */
  forwardGatewayCookies?: boolean
  /** Let the upstream's Set-Cookie reach the client (default no). */
  passSetCookie?: boolean
  /** Requests of this route may be retried or hedged whatever their method (default no). */
  idempotent?: boolean
  plugins: PluginEntry[]
  configPath: ConfigPath
}

export interface ProjectConfig {
  id: string
  name?: string
  plan: string
  scopes: string[]
  credits: { allocation: number; period: 'hour' | 'day' | 'month' }
  features: { proveBatch: boolean; sponsoredWallet: boolean; relayToConfidentialSpace: boolean; tee: boolean; workstation: boolean }
  secretHash?: string
  keys: { label: string; hash: string; disabled: boolean; expiresAt?: string }[]
  settings: Record<string, unknown>
  /** Low-balance webhooks (defaults filled in by the schema). */
  alerts?: {
    url: string
    secret: string
    thresholds: { percent?: number; remaining?: number }[]
    maxAttempts: number
    retryBaseMs: number
    retryMaxMs: number
    timeoutMs: number
  }
}

/** `store` of gateway.yaml: which engine, and where its state lives. */
export interface StoreConfig {
  engine: 'sqlite' | 'shared'
  dataDir: string
  postgres?: string
  redis?: string
  schema: string
  keyPrefix: string
  poolSize: number
  instanceTimeoutMs: number
  leaseCredits: number
  rateLeaseTokens: number
  /** When a charge is answered: after PostgreSQL's disk flush (durable) or before it (async). */
  creditCommit: 'durable' | 'async'
  /** Shared engine: a leased charge goes to PostgreSQL at reservation, alongside the upstream call. */
  chargeEarly: boolean
}

export interface WorkstationsConfig {
  driver: 'process' | 'docker'
  egress: 'none'
  env: Record<string, string>
  limits: { memoryMb: number; cpus: number; processes: number; diskMb: number; tmpMb: number }
  sandbox: { uidBase: number; uidCount: number; runDir: string }
  docker?: { socketPath: string; image: string; command?: string[] }
  /** code-server next to the terminal (process driver); absent: the terminal only. */
  ide?: { dir: string }
  dir: string
  creditsPerMinute: number
  idleStopMinutes: number
  startTimeoutSeconds: number
  stopTimeoutSeconds: number
  publicUrl?: string
  oidc?: { issuer: string; clientId: string; clientSecret?: string }
}

export interface GatewayConfig {
  version: 1
  server: {
    listen: { host: string; port: number }
    /** Trusted proxies (http/client-address.ts): false, true, a hop count or addresses/CIDRs/preset names. */
    trustProxy: TrustProxySetting
    drainTimeoutMs: number
    limits: {
      maxBodyBytes: number
      maxHeaderBytes: number
      headersTimeoutMs: number
      requestTimeoutMs: number
      bodyTimeoutMs: number
      smallBodyBytes: number
      keepAliveTimeoutMs: number
      maxRequestsPerSocket: number
    }
  }
  admin: { listen: { host: string; port: number }; tokenHash?: string; protectMetrics: boolean; sessions: AdminSessionsConfig }
  store: StoreConfig
  /** Cloud workstations; absent when the service is off. */
  workstations?: WorkstationsConfig
  log: { level: string; access: boolean }
  watch: boolean
  alerts: { checkIntervalMs: number }
  projects: ProjectConfig[]
  upstreams: Record<string, UpstreamConfig>
  plugins: PluginEntry[]
  routes: RouteConfig[]
  unmatched: { prefix: string; errorFormat: string }[]
  /** Absolute directory of the config file. */
  dir: string
  /** Absolute path of the config file. */
  file: string
  /** sha256 of the config text (after interpolation sources: file + projects file). */
  hash: string
}

/** `admin.sessions`: the admin accounts' sign-in sessions. */
export interface AdminSessionsConfig {
  idleTimeoutSeconds: number
  absoluteTimeoutSeconds: number
  secureCookie: boolean
  signInLimit: { perAccount: number; perIp: number; windowSeconds: number }
}
