// Generators of request inputs for property tests: values shaped by a route's zod schema (so requests
// get past the first check and reach the service), with hostile values mixed in at every level.
import fc from 'fast-check';
import { z } from 'zod';

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: JsonSchema | boolean;
  items?: JsonSchema;
  prefixItems?: JsonSchema[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  pattern?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
  default?: unknown;
};

/** Strings that have broken servers: control characters, header splitting, bad unicode, operators, paths. */
export const hostileString = fc.oneof(
  fc.constantFrom(
    '', ' ', '\u0000', 'a\r\nb', 'a\nSet-Cookie: x=1', '\t', '\u0085', '\u2028', '\u202e', '\ud800', '\udfff', '\uffff', '\ufeff',
    '💥'.repeat(100), 'é'.repeat(300), '../../../etc/passwd', '..', '.', '%2e%2e%2f', '%00', '\\\\', '$gt', '$where', 'a.b',
    '{"$ne":null}', '<script>alert(1)</script>', "' OR 1=1 --", '0x', '0x' + 'f'.repeat(64), '-1', '1e400', 'NaN', 'null',
    'a'.repeat(5000), '__proto__', 'constructor', 'http://169.254.169.254/latest/meta-data/',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
);

export const hostileNumber = fc.constantFrom(0, -0, -1, 1e308, -1e308, 2 ** 53 + 2, -(2 ** 63), 0.1 + 0.2, 5e-324, 1.5);

/** A JSON value nested `depth` levels deep, in arrays or objects. */
export const deepValue = (depth: number) => fc.constantFrom('array', 'object').map((kind) => {
  let value: unknown = 'x';
  for (let i = 0; i < depth; i++) value = kind === 'array' ? [value] : { a: value };
  return value;
});

/** Objects whose keys the database cannot store as they are. */
export const operatorKeyObject = fc.record({
  key: fc.constantFrom('$gt', '$ne', '$where', '$set', 'a.b', '.', '$', 'a\u0000b', ''),
  value: fc.oneof(fc.string({ maxLength: 5 }), fc.constant(null), fc.constant({ $ne: null })),
}).map(({ key, value }) => ({ [key]: value }));

export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: hostileString },
  { weight: 2, arbitrary: hostileNumber },
  { weight: 1, arbitrary: fc.constantFrom(true, false, null, [], {}) },
  { weight: 1, arbitrary: operatorKeyObject },
  { weight: 1, arbitrary: deepValue(40) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

/** How often a generated leaf is hostile instead of shaped by the schema. */
const HOSTILE_WEIGHT = 1;
const VALID_WEIGHT = 3;

const orHostile = (valid: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> =>
  fc.oneof({ weight: VALID_WEIGHT, arbitrary: valid }, { weight: HOSTILE_WEIGHT, arbitrary: hostileValue });

function stringFor(schema: JsonSchema): fc.Arbitrary<string> {
  if (schema.pattern) {
    try {
      return fc.stringMatching(new RegExp(schema.pattern)).map((s) => (schema.maxLength ? s.slice(0, schema.maxLength) : s));
    } catch {
      // a pattern fast-check cannot generate from: fall through to plain strings
    }
  }
  switch (schema.format) {
    case 'date-time': return fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString());
    case 'date': return fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10));
    case 'email': return fc.emailAddress();
    case 'uri': return fc.webUrl();
    default: return fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 40, 40) });
  }
}

function numberFor(schema: JsonSchema, integer: boolean): fc.Arbitrary<number> {
  const min = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : -1000);
  const max = schema.maximum ?? (schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - 1 : 1000);
  const lo = Math.max(min, -1e9);
  const hi = Math.min(max, 1e9);
  return integer ? fc.integer({ min: Math.ceil(lo), max: Math.floor(hi) }) : fc.double({ min: lo, max: hi, noNaN: true });
}

/**
 * An arbitrary for values of a JSON Schema (as zod's toJSONSchema writes it), hostile at every leaf with
 * probability 1/4, with `overrides` replacing the generator of named top-level properties.
 */
export function arbitraryOf(schema: JsonSchema, overrides: Record<string, fc.Arbitrary<unknown>> = {}, depth = 0): fc.Arbitrary<unknown> {
  if (depth > 6) return hostileValue;
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives?.length) return fc.oneof(...alternatives.map((s) => arbitraryOf(s, {}, depth + 1)));
  if (schema.allOf?.length) return arbitraryOf(schema.allOf[0]!, overrides, depth + 1);
  if (schema.const !== undefined) return orHostile(fc.constant(schema.const));
  if (schema.enum) return orHostile(fc.constantFrom(...schema.enum));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string': return orHostile(stringFor(schema));
    case 'integer': return orHostile(numberFor(schema, true));
    case 'number': return orHostile(numberFor(schema, false));
    case 'boolean': return orHostile(fc.boolean());
    case 'null': return orHostile(fc.constant(null));
    case 'array': {
      const items = schema.items ? arbitraryOf(schema.items, {}, depth + 1) : hostileValue;
      return orHostile(fc.array(items, { minLength: schema.minItems ?? 0, maxLength: Math.min(schema.maxItems ?? 4, 4) }));
    }
    case 'object': {
      const properties = schema.properties ?? {};
      const shape: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, sub] of Object.entries(properties)) shape[name] = overrides[name] ?? arbitraryOf(sub, {}, depth + 1);
      const required = (schema.required ?? []).filter((name) => name in shape);
      const record = fc.record(shape, { requiredKeys: required });
      const extra = typeof schema.additionalProperties === 'object'
        ? fc.dictionary(fc.oneof(fc.string({ minLength: 1, maxLength: 10 }), fc.constantFrom('$gt', 'a.b', '$where')), arbitraryOf(schema.additionalProperties, {}, depth + 1), { maxKeys: 4 })
        : fc.constant({});
      return fc.oneof(
        { weight: VALID_WEIGHT * 2, arbitrary: fc.tuple(record, extra).map(([r, e]) => ({ ...e, ...r })) },
        // an unknown key, which a strict schema must refuse with a 400
        { weight: 1, arbitrary: fc.tuple(record, operatorKeyObject).map(([r, e]) => ({ ...r, ...e })) },
        { weight: HOSTILE_WEIGHT, arbitrary: hostileValue },
      );
    }
    default: return fc.oneof(fc.jsonValue({ maxDepth: 3 }), hostileValue);
  }
}

/** The JSON Schema of what a zod schema accepts as input. */
export function jsonSchemaOf(schema: z.ZodType): JsonSchema {
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
}
