/**
 * The public entry point for plugin authors: `import { GatewayError, type PluginDefinition } from 'tollgate/plugin'`.
 * Everything a plugin needs from the gateway, and nothing it must not depend on. A plugin outside
 * the checkout resolves this specifier without node_modules (core/plugin-hooks.js maps it).
 */
export type {
  AdminAnswer,
  AdminHandler,
  BodyNeed,
  ErrorFormatter,
  JsonSchema,
  PluginDefinition,
  PluginInit,
  PluginInstance,
  RequestContext,
  ResponseState,
} from './plugin.ts'
export { GatewayError, errors, toGatewayError } from './errors.ts'
export type { Store } from './store/types.ts'
export type { Project, ApiKeyRecord, ProjectDirectory } from './projects.ts'
