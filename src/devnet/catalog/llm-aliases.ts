/**
 * Model aliases of the `llm-chat` merchant. A buyer names a model either by one of four stable aliases, which the
 * operator maps to concrete models (and may remap without breaking callers), or by a full `vendor/model` id,
 * which is forwarded untouched.
 */

export const LLM_ALIAS_NAMES = ['llm-fast', 'llm-balanced', 'llm-deep', 'llm-open'] as const;
export type LlmAlias = (typeof LLM_ALIAS_NAMES)[number];
export type LlmModelAliases = Readonly<Record<LlmAlias, string>>;

/** Defaults; the operator configures its own. Values are full `vendor/model` ids. */
export const LLM_MODEL_ALIASES: LlmModelAliases = Object.freeze({
  'llm-fast': 'openai/gpt-4o-mini',
  'llm-balanced': 'anthropic/claude-3.5-sonnet',
  'llm-deep': 'openai/o1',
  'llm-open': 'meta-llama/llama-3.1-70b-instruct',
});

/** `vendor/model`, optionally with a `:variant` (e.g. `mistralai/mistral-7b-instruct:free`). */
export const FULL_MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\/[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export type ModelAliasErrorCode = 'body_not_object' | 'model_missing' | 'model_not_string' | 'model_unknown' | 'body_not_json';

export class ModelAliasError extends Error {
  readonly code: ModelAliasErrorCode;
  constructor(code: ModelAliasErrorCode, message: string) {
    super(message);
    this.name = 'ModelAliasError';
    this.code = code;
  }
}

export function isLlmAlias(model: string): model is LlmAlias {
  return (LLM_ALIAS_NAMES as readonly string[]).includes(model);
}

/**
 * The concrete model a chat body asks for: the alias' configured id, or the full id as given.
 * Throws {@link ModelAliasError} for anything else.
 */
export function resolveModelId(model: unknown, aliases: LlmModelAliases = LLM_MODEL_ALIASES): string {
  if (model === undefined) throw new ModelAliasError('model_missing', 'the chat body has no "model"');
  if (typeof model !== 'string') throw new ModelAliasError('model_not_string', '"model" must be a string');
  if (isLlmAlias(model)) return aliases[model];
  if (FULL_MODEL_ID.test(model)) return model;
  throw new ModelAliasError('model_unknown', `"model" must be one of ${LLM_ALIAS_NAMES.join(', ')} or a full model id of the form vendor/model`);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Pure: a chat-completions body with an alias `model` replaced by its configured id. Any other key is kept as
 * it is (and in its order); a body that already names a full `vendor/model` id is returned unchanged (the same
 * object). Throws {@link ModelAliasError} when the body is not an object or `model` is missing or of another shape.
 */
export function resolveModelAlias(body: unknown, aliases: LlmModelAliases = LLM_MODEL_ALIASES): Record<string, unknown> {
  if (!isPlainObject(body)) throw new ModelAliasError('body_not_object', 'the chat body must be a JSON object');
  const model = body.model;
  const resolved = resolveModelId(model, aliases);
  if (resolved === model) return body;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) out[k] = k === 'model' ? resolved : v;
  return out;
}

/**
 * The same on the raw request body, for a proxy that forwards bytes: the original bytes when nothing needs
 * rewriting (so the body is forwarded verbatim), else the re-serialized JSON. Throws {@link ModelAliasError}
 * (`body_not_json` for bytes that are not UTF-8 JSON).
 */
export function resolveModelAliasInBody(raw: Uint8Array, aliases: LlmModelAliases = LLM_MODEL_ALIASES): { body: Uint8Array; model: string; rewritten: boolean } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(raw));
  } catch {
    throw new ModelAliasError('body_not_json', 'the chat body must be UTF-8 JSON');
  }
  const out = resolveModelAlias(parsed, aliases);
  const model = out.model as string;
  if (out === parsed) return { body: raw, model, rewritten: false };
  return { body: new TextEncoder().encode(JSON.stringify(out)), model, rewritten: true };
}
