/**
 * `zk-features`: the per-project ZK feature gates of the spec ("Project-level ZK features").
 * Project features come from gateway.yaml (projects[].features) and from run-time settings (admin
 * API); both reach `ctx.project` through the live project directory, so a toggle takes effect on
 * the next request; requests already running keep the project they started with.
 *
 * - `requireFeatures`: the route is refused (403 feature_disabled) unless every listed feature is
 *   on; `/prove-batch` requires `proveBatch`.
 * - `sponsored`: the request header (default `sponsored`), `true|false|1|0` only (else 400). `true`
 *   is forwarded as `sponsored: true` when the project has `sponsoredWallet`, 403 when it has not;
 *   `false` and absence forward nothing. The client's header is never passed through as sent.
 * - `tee`: the query parameter (default `tee_enabled`, `true|false|1|0`). A query parameter, not a
 *   header, because the body is binary and proxies such as nginx drop header names with `_`.
 *   `true` needs the project's `tee` feature (else 403) and sends the job to the TEE pool. The
 *   parameter is removed from the upstream query.
 * - `relay`: when the project has `relayToConfidentialSpace` (operator-only), jobs go to the
 *   relay pool. An explicit `tee_enabled=true` wins over the relay: it is the per-request choice.
 *
 * Needs `ctx.project`, so an auth plugin (priority 1250) must run first.
 */
import type { PluginDefinition, RequestContext } from '../../core/proxy/plugin-api.ts'
import { errors, GatewayError } from '../../core/proxy/plugin-api.ts'
import type { Project, ProjectFeatures } from '../../core/proxy/plugin-api.ts'
import { FLAG_SPELLINGS, parseFlag } from './flag.ts'

type Feature = keyof ProjectFeatures

export interface ZkFeaturesConfig {
  requireFeatures: Feature[]
  sponsored?: { header: string; upstreamHeader: string }
  tee?: { param: string; upstream: string }
  relay?: { upstream: string }
}

/** Names as the dashboard shows them, for messages. */
const FEATURE_NAMES: Record<Feature, string> = {
  proveBatch: 'ZK Prove Batch',
  sponsoredWallet: 'Sponsored Wallet',
  tee: 'TEE proving',
  relayToConfidentialSpace: 'Relay to Confidential Space',
  workstation: 'Cloud workstation',
}

const disabled = (feature: Feature) =>
  new GatewayError(403, 'feature_disabled', `${FEATURE_NAMES[feature]} is not enabled for this project`)

function requireProject(ctx: RequestContext): Project {
  // Only a route without an auth plugin gets here without a project: an operator mistake.
  if (!ctx.project) throw errors.internal('zk-features runs on a route without an authentication plugin')
  return ctx.project
}

function headerValue(ctx: RequestContext, name: string): string | undefined {
  const value = ctx.headers[name]
  return Array.isArray(value) ? value.join(', ') : value
}

const zkFeatures: PluginDefinition<ZkFeaturesConfig> = {
  name: 'zk-features',
  version: '1.0.0',
  priority: 1000,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      requireFeatures: {
        type: 'array',
        uniqueItems: true,
        default: [],
        items: { enum: ['proveBatch', 'sponsoredWallet', 'tee', 'relayToConfidentialSpace'] },
        description: 'Project features the route needs; any one off answers 403 feature_disabled.',
      },
      sponsored: {
        type: 'object',
        additionalProperties: false,
        description: 'Handle the Sponsored Wallet request header. Omit to leave the header alone.',
        properties: {
          header: { type: 'string', pattern: '^[a-z0-9-_]+$', default: 'sponsored', description: 'Request header carrying the flag (lower case).' },
          upstreamHeader: { type: 'string', pattern: '^[a-z0-9-_]+$', default: 'sponsored', description: 'Header sent upstream (value `true`) when sponsoring applies.' },
        },
      },
      tee: {
        type: 'object',
        additionalProperties: false,
        required: ['upstream'],
        description: 'Route `tee_enabled=true` proof jobs to a TEE proving pool. Omit to leave the parameter alone.',
        properties: {
          param: { type: 'string', minLength: 1, default: 'tee_enabled', description: 'Query parameter carrying the flag.' },
          upstream: { type: 'string', minLength: 1, description: 'Upstream (pool) that runs TEE proof jobs.' },
        },
      },
      relay: {
        type: 'object',
        additionalProperties: false,
        required: ['upstream'],
        description: 'Route proof jobs of projects with relayToConfidentialSpace to the relay upstream.',
        properties: { upstream: { type: 'string', minLength: 1, description: 'Upstream that relays to the confidential space.' } },
      },
    },
  },
  create(config, init) {
    for (const target of [config.tee?.upstream, config.relay?.upstream]) {
      if (target !== undefined && !init.upstreamNames.includes(target)) throw new Error(`unknown upstream "${target}"`)
    }
    const { requireFeatures, sponsored, tee, relay } = config
    return {
      request(ctx) {
        const project = requireProject(ctx)
        for (const feature of requireFeatures) if (!project.features[feature]) throw disabled(feature)

        if (sponsored) {
          const asked = parseFlag(headerValue(ctx, sponsored.header))
          if (asked === null) throw new GatewayError(400, 'invalid_header', `header ${sponsored.header} must be ${FLAG_SPELLINGS}`)
          if (asked && !project.features.sponsoredWallet) throw disabled('sponsoredWallet')
          ctx.upstreamHeaders[sponsored.header] = null
          if (asked) {
            ctx.upstreamHeaders[sponsored.upstreamHeader] = 'true'
            ctx.logFields.sponsored = true
          }
        }

        if (tee) {
          const values = ctx.query.getAll(tee.param)
          if (values.length > 1) throw new GatewayError(400, 'invalid_query', `query parameter ${tee.param} must appear at most once`)
          if (values.length === 1) {
            const asked = parseFlag(values[0])
            if (asked === null) throw new GatewayError(400, 'invalid_query', `query parameter ${tee.param} must be ${FLAG_SPELLINGS}`)
            if (asked && !project.features.tee) throw disabled('tee')
            const rest = new URLSearchParams(ctx.upstreamQuery ?? ctx.query.toString())
            rest.delete(tee.param)
            ctx.upstreamQuery = rest.toString()
            if (asked) {
              ctx.upstream = tee.upstream
              ctx.logFields.tee = true
              return
            }
          }
        }

        if (relay && project.features.relayToConfidentialSpace) {
          ctx.upstream = relay.upstream
          ctx.logFields.zkRelay = true
        }
      },
    }
  },
}

export default zkFeatures
