/** What a diff side can be: a stored snapshot, or one version of it (the generated type fits). */
export interface VersionedSnapshot {
  resourcesId: string;
  version: number;
  updateTime: number;
}

/** What a diff key names: a snapshot id's current version, or (`id@version`) one published version of it. */
export interface SnapshotKey {
  resourcesId: string;
  /** Absent for the current version (GetResources reads 0 as the current one). */
  version?: number;
}

/** The key of a version of a snapshot id: `id@version`. */
export const versionKey = (resourcesId: string, version: number) => `${resourcesId}@${version}`;

/** Reads a diff key: `id@<version ≥ 1>` names that version; anything else names the id's current version. */
export function parseSnapshotKey(key: string): SnapshotKey {
  const match = /^(.+)@([1-9]\d*)$/.exec(key);
  return match ? { resourcesId: match[1] as string, version: Number(match[2]) } : { resourcesId: key };
}

/**
 * The keys the resources diff offers, with their snapshots: each stored snapshot under its id (its current version),
 * and each other version at hand (a history page, versions seen live) under `id@version`. Newest first.
 */
export function snapshotChoices<S extends VersionedSnapshot>(stored: readonly S[], versions: readonly S[]): Map<string, S> {
  const out = new Map<string, S>();
  const all = [
    ...stored.map((s) => ({ key: s.resourcesId, s })),
    ...versions.map((s) => ({ key: versionKey(s.resourcesId, s.version), s })),
  ];
  all.sort((a, b) => b.s.updateTime - a.s.updateTime || a.key.localeCompare(b.key));
  for (const { key, s } of all) {
    const latest = stored.find((x) => x.resourcesId === s.resourcesId);
    // A version that is the stored latest is the same snapshot: listed once, by id.
    if (key !== s.resourcesId && latest?.version === s.version) continue;
    if (!out.has(key)) out.set(key, s);
  }
  return out;
}
