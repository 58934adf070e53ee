/** placeholder until written below */
export function adminOpenApi(): Record<string, unknown> {
  return {}
}
