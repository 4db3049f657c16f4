/** True for `application/json`, with or without parameters (`; charset=utf-8`). */
export function isJsonContentType(value: string | undefined): boolean {
  if (value === undefined) return false;
  return value.split(';', 1)[0]!.trim().toLowerCase() === 'application/json';
}
