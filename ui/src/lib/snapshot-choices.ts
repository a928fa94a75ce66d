/** What a diff side can be: a stored snapshot, or a version seen on WatchResources (the generated type fits). */
export interface VersionedSnapshot {
  resourcesId: string;
  version: number;
  updateTime: number;
}

/**
 * Everything the resources diff can compare, by key: each stored snapshot under its id (the store keeps the latest
 * version of an id), and each version seen live under `id@version`, so two versions of one id can be compared while
 * the page is open. Newest first.
 */
export function snapshotChoices<S extends VersionedSnapshot>(stored: readonly S[], seen: readonly S[]): Map<string, S> {
  const out = new Map<string, S>();
  const all = [...stored.map((s) => ({ key: s.resourcesId, s })), ...seen.map((s) => ({ key: `${s.resourcesId}@${s.version}`, s }))];
  all.sort((a, b) => b.s.updateTime - a.s.updateTime || a.key.localeCompare(b.key));
  for (const { key, s } of all) {
    const latest = stored.find((x) => x.resourcesId === s.resourcesId);
    // A seen version that is the stored latest is the same snapshot: listed once, by id.
    if (key !== s.resourcesId && latest?.version === s.version) continue;
    if (!out.has(key)) out.set(key, s);
  }
  return out;
}
