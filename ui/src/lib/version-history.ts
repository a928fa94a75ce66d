import { equals } from "@bufbuild/protobuf";
import { type Resource, ResourceSchema, type ResourcesUpdate } from "../../../src/gen/agl/v1/types_pb.js";

/** How one named resource moved from the previous version to this one. */
export interface ResourceChange {
  name: string;
  change: "added" | "removed" | "changed";
}

/** One version of a snapshot id as its history lists it. */
export interface VersionEntry {
  version: number;
  createTime: number;
  updateTime: number;
  /** Against the previous version, sorted by name; undefined when that version is not at hand (on another page). */
  changes?: ResourceChange[];
}

/**
 * The history entries of some versions of one snapshot id, in the order given. Each is compared with the version
 * just before it when the list holds that one; version 1 has nothing before it, so all its resources are added.
 */
export function versionHistory(versions: readonly ResourcesUpdate[]): VersionEntry[] {
  const byVersion = new Map(versions.map((v) => [v.version, v]));
  return versions.map((v) => {
    const entry: VersionEntry = { version: v.version, createTime: v.createTime, updateTime: v.updateTime };
    const previous = v.version === 1 ? {} : byVersion.get(v.version - 1)?.resources;
    if (previous !== undefined) entry.changes = resourceChanges(previous, v.resources);
    return entry;
  });
}

/** The names whose resource differs between two versions (added, removed, or not equal field by field), sorted. */
export function resourceChanges(before: Record<string, Resource>, after: Record<string, Resource>): ResourceChange[] {
  const names = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  const out: ResourceChange[] = [];
  for (const name of names) {
    const a = before[name];
    const b = after[name];
    if (a === undefined) out.push({ name, change: "added" });
    else if (b === undefined) out.push({ name, change: "removed" });
    else if (!equals(ResourceSchema, a, b)) out.push({ name, change: "changed" });
  }
  return out;
}
