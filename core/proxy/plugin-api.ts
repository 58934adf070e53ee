/**
 * The public entry point for plugin authors: `import { GatewayError, type PluginDefinition } from 'tollgate/plugin'`.
 * Everything a plugin needs from the gateway, and nothing it must not depend on. A plugin outside
 * the checkout resolves this specifier without node_modules (core/proxy/plugin-hooks.js maps it).
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
export { RequestSlot } from './context.ts'
export type { Store } from '../store/types.ts'
export type { Project, ApiKeyRecord, ProjectDirectory } from '../projects/projects.ts'
// What the built-in plugins use besides the contract: bounded JSON, the body helpers, upstream
// handles and their failure mapping, project shapes and period arithmetic.
export { SCOPES, generateKey, hashCredential } from '../projects/projects.ts'
export type { ProjectFeatures, Scope } from '../projects/projects.ts'
export { isJsonMediaType, mediaType, parseJson } from './http/body.ts'
export { upstreamFailure } from './http/forward.ts'
export type { UpstreamHandle } from './http/upstreams.ts'
export { parseBoundedJson } from './json.ts'
export { SeriesCounter, type CounterSeries } from './series-metrics.ts'
export type { JsonTextError } from './json.ts'
export { PluginConfigError } from './plugin.ts'
export type { DescribedRoute } from './plugin.ts'
export { currentSchedulePeriod, scheduleBounds } from '../store/periods.ts'
export { SettingsConflict } from '../store/settings/types.ts'
export type { BillingPeriod, SettingsStore } from '../store/settings/types.ts'
