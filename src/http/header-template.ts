/**
 * Header values made once and filled per response: the fixed parts of a value are checked when the template is made,
 * and only the short fillers between them on each response (see `server.ts`, which writes a {@link FilledHeader} as
 * it is).
 */

/** What a response header value may hold. */
export const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/** What a {@link fillHeader} filler may hold: base64url characters, which are valid anywhere in a header value. */
const FILLER = /^[A-Za-z0-9_-]*$/;

/** The fixed parts of a header value, checked once; per response, {@link fillHeader} puts fillers between them. */
export interface HeaderTemplate {
  readonly parts: readonly string[];
}

/** A header value made by {@link fillHeader}: written as it is, its template having been checked and its fillers too. */
export class FilledHeader {
  readonly value: string;
  private constructor(value: string) {
    this.value = value;
  }

  /** @internal */
  static of(value: string): FilledHeader {
    return new FilledHeader(value);
  }
}

/** Checks the fixed parts of a header value once (throws TypeError like any invalid header). */
export function headerTemplate(parts: readonly string[]): HeaderTemplate {
  for (const part of parts) if (!HEADER_VALUE.test(part)) throw new TypeError(`invalid header template part ${JSON.stringify(part)}`);
  return Object.freeze({ parts: Object.freeze([...parts]) });
}

/**
 * A header value: the template's parts with `fillers` between them (one fewer filler than parts), each filler only
 * base64url characters. Only the short fillers are checked per response, not the whole value.
 */
export function fillHeader(template: HeaderTemplate, fillers: readonly string[]): FilledHeader {
  const { parts } = template;
  if (fillers.length !== parts.length - 1) throw new TypeError(`a header template of ${parts.length} parts takes ${parts.length - 1} fillers`);
  let value = parts[0] as string;
  for (let i = 0; i < fillers.length; i++) {
    const filler = fillers[i] as string;
    if (!FILLER.test(filler)) throw new TypeError(`invalid header filler ${JSON.stringify(filler)}`);
    value += filler + (parts[i + 1] as string);
  }
  return FilledHeader.of(value);
}
