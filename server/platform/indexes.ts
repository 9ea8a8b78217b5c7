import type { Connection, Model } from 'mongoose';

type IndexSpec = { key: Record<string, 1 | -1>; name: string; unique?: boolean; sparse?: boolean; expireAfterSeconds?: number; partialFilterExpression?: Record<string, unknown> };

/**
 * The options that make two indexes of one name different. Not `sparse`: the embedded engine accepts it and
 * lists it nowhere (its indexes hold every document), so it cannot be compared there.
 */
const OPTIONS = ['unique', 'expireAfterSeconds', 'partialFilterExpression'] as const;
/** What createIndexes is given besides the key and name: the compared options and `sparse`. */
const CREATE_OPTIONS = [...OPTIONS, 'sparse'] as const;

/**
 * Makes sure the indexes every model declares exist. Every process does it at its start (it is idempotent),
 * so a version that adds an index needs no migration step; unique indexes carry correctness (inbox
 * addresses, key hashes), so a process serves nothing before they are there.
 *
 * Mongoose's own (autoIndex) sends one createIndex per declared index at every start, one after another per
 * collection: about 90 commands, up to a dozen in a row for one collection, each a catalog lookup on the
 * embedded engine, so a restart on a busy machine waited seconds for indexes that were all there. Here each
 * collection costs one listIndexes, side by side, and only what is missing is created, all of a
 * collection's in one createIndexes command.
 *
 * An index of a declared name whose fields or options differ (a new version made it unique, say) fails the
 * start, as MongoDB's refusal to change it did through mongoose (the embedded engine refuses nothing and
 * keeps the old one): a process that served with the old index would lack the guarantee the new one carries.
 */
export async function ensureIndexes(db: Connection): Promise<void> {
  await Promise.all(Object.values(db.models).map((model) => ensureModelIndexes(model)));
}

async function ensureModelIndexes(model: Model<unknown>): Promise<void> {
  const declared = declaredIndexes(model);
  if (!declared.length) return;
  const existing = await existingIndexes(model);
  const missing: IndexSpec[] = [];
  for (const index of declared) {
    const found = existing.find((ix) => ix.name === index.name);
    if (!found) missing.push(index);
    else if (!sameIndex(found, index)) throw new IndexChangedError(model.collection.collectionName, found, index);
  }
  if (missing.length) await model.collection.createIndexes(missing);
}

export class IndexChangedError extends Error {
  constructor(collection: string, found: Record<string, unknown>, wanted: IndexSpec) {
    const shown = (ix: Record<string, unknown>) => JSON.stringify(Object.fromEntries(['key', ...OPTIONS].filter((k) => ix[k] !== undefined && ix[k] !== false).map((k) => [k, ix[k]])));
    super(`index ${wanted.name} of ${collection} is ${shown(found)} in the database, and this version declares ${shown(wanted as unknown as Record<string, unknown>)}: drop it (db.${collection}.dropIndex("${wanted.name}")) and start again, and the start makes it as declared`);
  }
}

/** The schema's indexes as createIndexes takes them, named as the driver names them by default. */
export function declaredIndexes(model: Model<unknown>): IndexSpec[] {
  return model.schema.indexes().map(([key, options]) => {
    const spec: IndexSpec = { key: key as IndexSpec['key'], name: (options.name as string | undefined) ?? defaultName(key as IndexSpec['key']) };
    for (const option of CREATE_OPTIONS) if (options[option] !== undefined) (spec as Record<string, unknown>)[option] = options[option];
    return spec;
  });
}

async function existingIndexes(model: Model<unknown>): Promise<Array<Record<string, unknown>>> {
  try {
    return await model.collection.listIndexes().toArray();
  } catch (err) {
    // A collection not made yet has no indexes; createIndexes makes it.
    if ((err as { code?: number }).code === 26 /* NamespaceNotFound */) return [];
    throw err;
  }
}

function sameIndex(found: Record<string, unknown>, wanted: IndexSpec): boolean {
  if (JSON.stringify(found.key) !== JSON.stringify(wanted.key)) return false;
  // Absent and false are the same for the flags (engines differ in which of the two they list).
  const value = (v: unknown) => JSON.stringify(v === false ? undefined : v);
  return OPTIONS.every((option) => value(found[option]) === value(wanted[option]));
}

/** The driver's default name for an index: its fields and directions, as `orgId_1_createdAt_-1`. */
function defaultName(key: IndexSpec['key']): string {
  return Object.entries(key).map(([field, direction]) => `${field}_${direction}`).join('_');
}
