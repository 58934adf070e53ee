/**
 * `events`: the event settings service (gateway spec "Endpoints: Event settings") as a handler
 * plugin. One route creates items (`operation: create`, path with `:item`), one lists the
 * project's items (`operation: list`). Items live in the store's documents, owned by the project,
 * so they survive restarts and no project ever sees another's.
 *
 * Authentication (key in the path + `x-api-secret`), metering and rate limits are the route's
 * other plugins; this handler only needs `ctx.project` to be set by them.
 *
 * ```yaml
 * routes:
 *   - name: events-create
 *     methods: [POST]
 *     path: /events/ledger/create/:item/:apiKey
 *     handler: { name: events, config: { operation: create } }
 *     plugins:
 *       - { name: key-in-path-auth, config: { param: apiKey, scope: events } }
 *       - { name: secret-check, config: { header: x-api-secret } }
 * ```
 */
import type { PluginDefinition, RequestContext } from '../../core/proxy/plugin-api.ts'
import { errors, GatewayError } from '../../core/proxy/plugin-api.ts'
import type { Project } from '../../core/proxy/plugin-api.ts'
import { assertValidBody, compileBodyValidators, type BodyValidators } from './schema.ts'
import { DEFAULT_TYPE_IDS, isItemKind, itemKey, newEventItem, type EventItem, type ItemKind, type NetworkId } from './items.ts'

export interface EventsConfig {
  operation: 'create' | 'list'
  itemParam: string
  collection: string
  typeIds: Record<ItemKind, number>
  requestFetchLimit: number
}

const typeId = (kind: ItemKind) => ({
  type: 'integer',
  minimum: 0,
  default: DEFAULT_TYPE_IDS[kind],
  description: `type_id given to new ${kind} items.`,
})

/** Longest item segment quoted back in a 404; the rest is cut so an error stays one short line. */
const MAX_QUOTED = 40

function requireProject(ctx: RequestContext): Project {
  // Only a route without an auth plugin gets here without a project: an operator mistake.
  if (!ctx.project) throw errors.internal('the event settings route has no authentication plugin')
  return ctx.project
}

function unknownKind(segment: string): GatewayError {
  const quoted = segment.length > MAX_QUOTED ? segment.slice(0, MAX_QUOTED) + '…' : segment
  return new GatewayError(404, 'unknown_item_kind', `unknown item kind ${JSON.stringify(quoted)}; expected contract, ethtopic or account`)
}

interface CreateBody {
  scoutSettings: { item_id: string; network_id: NetworkId }
}

const events: PluginDefinition<EventsConfig> = {
  name: 'events',
  version: '1.0.0',
  priority: 100,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['operation'],
    properties: {
      operation: {
        enum: ['create', 'list'],
        description: '`create`: POST .../create/:item/:apiKey makes an item. `list`: POST .../settings/:apiKey lists the project\'s items.',
      },
      itemParam: {
        type: 'string',
        pattern: '^[A-Za-z0-9_]+$',
        default: 'item',
        description: 'Path param holding the item kind (contract, ethtopic or account); used by `create`.',
      },
      collection: {
        type: 'string',
        pattern: '^[a-z0-9][a-z0-9-]*$',
        default: 'event-items',
        description: 'Store document collection of the items; the create and list routes must name the same one.',
      },
      typeIds: {
        type: 'object',
        additionalProperties: false,
        default: { ...DEFAULT_TYPE_IDS },
        description: 'type_id per item kind (the spec shows account = 1; contract = 2 and ethtopic = 5 are this service\'s choice).',
        properties: { account: typeId('account'), contract: typeId('contract'), ethtopic: typeId('ethtopic') },
      },
      requestFetchLimit: {
        type: 'integer',
        minimum: 1,
        maximum: 10000,
        default: 100,
        description: 'request_fetch_limit of new items (the spec gives 100).',
      },
    },
  },
  needs: () => ({ body: 'json' }),
  create(config, init) {
    if (config.operation === 'create' && !init.routeParams.includes(config.itemParam)) {
      throw new Error(`operation create reads the item kind from :${config.itemParam}, which the route path ${init.route.path} does not define`)
    }
    const validators: BodyValidators = compileBodyValidators()
    const items = init.store.documents(config.collection)

    const createItem = async (ctx: RequestContext) => {
      const project = requireProject(ctx)
      const kind = ctx.params[config.itemParam] ?? ''
      if (!isItemKind(kind)) throw unknownKind(kind)
      assertValidBody(validators.create[kind], ctx.body?.json)
      const { item_id: itemId, network_id: networkId } = (ctx.body!.json as CreateBody).scoutSettings
      const item = newEventItem({ kind, projectId: project.id, itemId, networkId, typeIds: config.typeIds, requestFetchLimit: config.requestFetchLimit })
      // Keyed by (project, kind, network, item): a repeated or concurrent create finds the first item.
      const { created, stored } = await items.insertIfAbsent<EventItem>(itemKey(project.id, kind, networkId, itemId), project.id, item)
      ctx.logFields.eventItem = { kind, created }
      ctx.respond(200, { status: true, response: stored.doc })
    }

    const listItems = async (ctx: RequestContext) => {
      const project = requireProject(ctx)
      assertValidBody(validators.list, ctx.body?.json)
      const stored = await items.listByOwner<EventItem>(project.id)
      ctx.logFields.eventItems = stored.length
      ctx.respond(200, stored.map((entry) => entry.doc))
    }

    return { handle: config.operation === 'create' ? createItem : listItems }
  },
}

export default events
