/**
 * The core's JSON Schema for gateway.yaml. Plugin configs are validated separately against each
 * plugin's own schema (so errors name the plugin); {@link composeSchema} merges both for editors.
 */
import type { JsonSchema, PluginDefinition } from '../proxy/plugin.ts'
import { projectSchema } from './projects-schema.ts'
import { storeSchema } from './store-schema.ts'
import { upstreamSchema } from './upstream-schema.ts'
import { workstationsSchema } from './workstations-schema.ts'

const listen = (port: number, what: string): JsonSchema => ({
  type: 'object',
  additionalProperties: false,
  description: `Address the ${what} listener binds.`,
  properties: {
    host: { type: 'string', default: '127.0.0.1', description: 'Interface to bind; loopback by default.' },
    port: { type: 'integer', minimum: 0, maximum: 65535, default: port, description: 'TCP port; 0 picks a free one.' },
  },
  default: { host: '127.0.0.1', port },
})

const pluginEntry: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  description: 'One plugin of a chain: its name and its config (validated against the plugin schema).',
  properties: {
    name: { type: 'string', description: 'Plugin name (a folder under plugins/ or a custom plugin).' },
    config: { type: 'object', description: "The plugin's config; see `tollgate schema` for each plugin's fields." },
    enabled: { type: 'boolean', default: true, description: 'Set false to keep the entry but skip it.' },
  },
}

const route: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'path'],
  description: 'A route: method + path pattern, a plugin chain and a target (upstream or handler plugin).',
  properties: {
    name: {
      type: 'string',
      pattern: '^[a-zA-Z0-9_.:{}-]+$',
      description: 'Unique name; used as the metrics label and in logs. `{var}` names an `each` variable.',
    },
    methods: {
      type: 'array',
      minItems: 1,
      uniqueItems: true,
      items: { enum: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] },
      default: ['GET'],
      description: 'HTTP methods this route answers; others get 405 with Allow.',
    },
    path: {
      type: 'string',
      pattern: '^/',
      description: 'Path pattern: static segments, `:param` segments and an optional final `*rest`.',
    },
    upstream: { type: 'string', description: 'Name of the upstream to forward to (exclusive with handler).' },
    rewrite: {
      type: 'string',
      pattern: '^/',
      description: 'Path sent upstream; `:param` and `*rest` are substituted. Default: the request path.',
    },
    handler: { ...pluginEntry, description: 'A handler plugin that answers instead of an upstream.' },
    apiType: { type: 'string', description: 'API type for metering and metrics (e.g. PRIVNET_ZKPAAS).' },
    errorFormat: { type: 'string', default: 'json', description: 'How errors are rendered: json, or a format a plugin provides.' },
    maxBodyBytes: { type: 'integer', minimum: 0, description: 'Request body cap for this route; default server.limits.maxBodyBytes.' },
    bodyTimeoutMs: {
      type: 'integer',
      minimum: 1,
      description:
        'Time a client has to send the whole request body of this route, counted from the request head; past it 408 request_timeout and the connection is closed. Default: server.limits.bodyTimeoutMs when the route body cap is at most server.limits.smallBodyBytes, else server.limits.requestTimeoutMs.',
    },
    maxResponseBodyBytes: {
      type: 'integer',
      minimum: 1024,
      default: 8388608,
      description: 'Cap on an upstream body buffered for response-body plugins; past it the answer is 502.',
    },
    forwardAuthorization: {
      type: 'boolean',
      default: false,
      description:
        "Send the client's Authorization header to the upstream. Off by default: it is usually a credential for the gateway, not for the upstream. An Authorization a plugin sets for the upstream is sent either way.",
    },
    forwardGatewayCookies: {
      type: 'boolean',
      default: false,
      description:
        "Send the gateway's own cookies (every cookie named tollgate_*: admin and workstation sessions) to the upstream. Off by default: they would let the upstream act as the user. The client's other cookies are always sent.",
    },
    idempotent: {
      type: 'boolean',
      default: false,
      description: 'Requests of this route may be sent again (retried on another target, hedged) whatever their method. Off by default: only GET and HEAD are retried; a write is sent once.',
    },
    passSetCookie: {
      type: 'boolean',
      default: false,
      description: "Let the upstream's Set-Cookie reach the client. Off by default: an upstream must not set cookies on the gateway's origin (its session cookies live there).",
    },
    plugins: { type: 'array', items: pluginEntry, default: [], description: 'Plugins of this route, on top of the global ones.' },
    each: {
      type: 'object',
      minProperties: 1,
      propertyNames: { pattern: '^[A-Za-z][A-Za-z0-9_]*$' },
      additionalProperties: {
        type: 'array',
        minItems: 1,
        uniqueItems: true,
        items: { type: 'string', pattern: '^[A-Za-z0-9_.-]+$' },
      },
      description:
        'Route template: one route per combination of these variables\' values, e.g. `{ network: [mainnet, testnet] }`. ' +
        'Every `{network}` in the route\'s strings (name, path, rewrite, upstream, plugin configs) becomes the value; ' +
        'the name must use every variable so the routes get distinct names.',
    },
  },
}

export const coreSchema: JsonSchema = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  title: 'tollgate gateway.yaml',
  type: 'object',
  additionalProperties: false,
  required: ['version', 'routes'],
  properties: {
    version: { const: 1, description: 'Config format version; must be 1.' },
    server: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'The public listener.',
      properties: {
        listen: listen(8080, 'public'),
        trustProxy: {
          default: false,
          description:
            'Which peers are proxies whose X-Forwarded-For/-Proto/-Host are believed. The client IP is the right-most X-Forwarded-For address that is not a trusted proxy (as nginx real_ip and Express trust proxy). ' +
            'false: none (the socket peer is the client); a list of addresses, CIDRs and the names loopback, private, linklocal; a hop count n (the n nearest hops are proxies, whatever their address); ' +
            'true: [loopback, private, linklocal].',
          oneOf: [
            { type: 'boolean' },
            { type: 'integer', minimum: 1, maximum: 64 },
            { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string', minLength: 1 } },
          ],
        },
        drainTimeoutMs: { type: 'integer', minimum: 0, default: 10000, description: 'On SIGTERM, how long in-flight requests may finish.' },
        limits: {
          type: 'object',
          additionalProperties: false,
          default: {},
          description: 'Protection against slow or abusive clients.',
          properties: {
            maxBodyBytes: { type: 'integer', minimum: 0, default: 1048576, description: 'Default request body cap (413 past it).' },
            maxHeaderBytes: { type: 'integer', minimum: 1024, default: 16384, description: 'Max size of the request headers.' },
            headersTimeoutMs: { type: 'integer', minimum: 1, default: 10000, description: 'Time a client has to send its headers.' },
            requestTimeoutMs: {
              type: 'integer',
              minimum: 0,
              default: 300000,
              description:
                'Time a client has to send the whole request (head and body) on any route; past it node answers 408 and closes the connection (0 = no limit). Routes with large bodies (proofs) need it long; small-body routes are bounded tighter by bodyTimeoutMs.',
            },
            bodyTimeoutMs: {
              type: 'integer',
              minimum: 1,
              default: 30000,
              description:
                'Time a client has to send the body on routes whose body cap is at most smallBodyBytes (a route may set its own bodyTimeoutMs); past it 408 request_timeout and the connection is closed, so a slow client cannot hold a socket for the whole requestTimeoutMs.',
            },
            smallBodyBytes: {
              type: 'integer',
              minimum: 0,
              default: 1048576,
              description: 'Routes whose body cap is at most this many bytes get bodyTimeoutMs as their body deadline; larger ones get requestTimeoutMs.',
            },
            keepAliveTimeoutMs: { type: 'integer', minimum: 1, default: 5000, description: 'Idle keep-alive time of a client socket.' },
            maxRequestsPerSocket: { type: 'integer', minimum: 0, default: 0, description: 'Requests per keep-alive socket (0 = unlimited).' },
          },
        },
      },
    },
    admin: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'The admin listener: /healthz, /readyz, /metrics and the admin API.',
      properties: {
        listen: listen(8081, 'admin'),
        tokenHash: {
          type: 'string',
          pattern: '^sha256:[0-9a-f]{64}$',
          description: 'sha256 digest of the admin bearer token; without it no bearer token is accepted and only signed-in accounts (tollgate user add) reach the admin API.',
        },
        protectMetrics: { type: 'boolean', default: false, description: 'Require the admin token on /metrics too.' },
        sessions: {
          type: 'object',
          additionalProperties: false,
          default: {},
          description: 'Sign-in sessions of admin accounts (tollgate user add): a cookie that expires when idle and at an absolute limit.',
          properties: {
            idleTimeoutSeconds: { type: 'integer', minimum: 1, maximum: 604800, default: 1800, description: 'A session unused for this long is expired (signed out).' },
            absoluteTimeoutSeconds: {
              type: 'integer',
              minimum: 1,
              maximum: 2592000,
              default: 43200,
              description: 'A session ends this long after sign-in, however active it is.',
            },
            secureCookie: {
              type: 'boolean',
              default: false,
              description: 'Always mark the session cookie Secure (set it when a TLS terminator sits in front of the admin listener); it is Secure anyway when the request came over TLS.',
            },
            signInLimit: {
              type: 'object',
              additionalProperties: false,
              default: {},
              description: 'Sign-in attempts allowed per account and per client IP within a window (token buckets); beyond them 429 with Retry-After.',
              properties: {
                perAccount: { type: 'integer', minimum: 1, default: 5, description: 'Attempts per email address per window.' },
                perIp: { type: 'integer', minimum: 1, default: 20, description: 'Attempts per client IP per window.' },
                windowSeconds: { type: 'integer', minimum: 1, default: 300, description: 'The window the attempts refill over.' },
              },
            },
          },
        },
      },
    },
    workstations: workstationsSchema,
    store: storeSchema,
    log: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Structured JSON logs (pino) on stdout.',
      properties: {
        level: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], default: 'info', description: 'Minimum level.' },
        access: { type: 'boolean', default: true, description: 'One access line per request.' },
      },
    },
    watch: { type: 'boolean', default: true, description: 'Reload when gateway.yaml changes on disk (also on SIGHUP).' },
    alerts: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Low-balance alerts of every project (each project sets its own in projects[].alerts).',
      properties: {
        checkIntervalMs: { type: 'integer', minimum: 50, default: 5000, description: 'How often the balances of projects with alerts are read.' },
      },
    },
    projectsFile: { type: 'string', description: 'YAML file with a `projects` list, relative to gateway.yaml.' },
    projects: { type: 'array', items: projectSchema, default: [], description: 'Projects and their hashed credentials.' },
    upstreams: { type: 'object', additionalProperties: upstreamSchema, default: {}, description: 'Named upstreams.' },
    customPlugins: {
      type: 'array',
      default: [],
      description: 'Plugins loaded from paths (same contract as plugins/).',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['path'],
        properties: { path: { type: 'string', description: 'Module path, relative to gateway.yaml.' } },
      },
    },
    plugins: { type: 'array', items: pluginEntry, default: [], description: 'Global plugins, run on every route.' },
    routes: { type: 'array', items: route, description: 'The route table.' },
    unmatched: {
      type: 'array',
      default: [],
      description: 'Error format of 404s for paths that match no route, by path prefix (longest prefix wins); default json.',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['prefix', 'errorFormat'],
        properties: {
          prefix: { type: 'string', pattern: '^/', description: 'Path prefix, e.g. /ledger/mainnet/api/v1/.' },
          errorFormat: { type: 'string', description: 'Error format for 404s under this prefix.' },
        },
      },
    },
  },
}

/** Core schema with each plugin's config schema bound to its name: what editors use. */
export function composeSchema(plugins: readonly PluginDefinition[]): JsonSchema {
  const bindings = plugins.map((plugin) => ({
    if: { properties: { name: { const: plugin.name } }, required: ['name'] },
    then: { properties: { config: plugin.configSchema } },
  }))
  const names = plugins.map((plugin) => plugin.name)
  const entry = {
    ...pluginEntry,
    properties: { ...(pluginEntry.properties as object), name: { enum: names, description: 'Plugin name.' } },
    allOf: bindings,
  }
  const schema = structuredClone(coreSchema) as any
  schema.$defs = { pluginEntry: entry }
  schema.properties.plugins.items = { $ref: '#/$defs/pluginEntry' }
  schema.properties.routes.items.properties.plugins.items = { $ref: '#/$defs/pluginEntry' }
  schema.properties.routes.items.properties.handler = { $ref: '#/$defs/pluginEntry' }
  return schema
}
