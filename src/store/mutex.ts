/** Runs async sections one at a time, in call order. */
export interface Mutex {
  run<T>(section: () => Promise<T>): Promise<T>;
}

export function createMutex(): Mutex {
  let tail: Promise<unknown> = Promise.resolve();
  return {
    run(section) {
      const result = tail.then(section);
      tail = result.catch(() => undefined);
      return result;
    },
  };
}
