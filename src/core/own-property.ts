/**
 * Sets `target[key]` as an own, enumerable data property, even for the key `__proto__`, which an assignment would take
 * as the object's prototype (and the key would be lost). For keys that come from users: JSON keys, attribute names.
 */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

/** `Object.assign(target, source)` for own enumerable string keys, through {@link setOwn}: a key `__proto__` stays a key. */
export function assignOwn<T extends Record<string, unknown>>(target: T, source: Readonly<Record<string, unknown>>): T {
  for (const key of Object.keys(source)) setOwn(target, key, source[key]);
  return target;
}
