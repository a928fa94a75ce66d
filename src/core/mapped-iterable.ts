/**
 * `source` with `map` applied to each value, and `fail` to the error it ends with (when given): the iterable an async
 * generator of `for await (const v of source) yield map(v)` inside `try … catch (e) { throw fail(e) }` makes, as an
 * iterator object. A generator costs each value a resumption and a promise step more, and the server puts such a
 * wrapper around every message of every stream it answers. As the generator would, it closes `source` when `map`
 * throws and passes a consumer's early `return()` on to it; once it ended, it stays ended.
 */
export function mapAsyncIterable<T, U>(
  source: AsyncIterable<T>,
  map: (value: T) => U,
  fail: (error: unknown) => unknown = (error) => error,
): AsyncIterable<U> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<U> {
      const iterator = source[Symbol.asyncIterator]();
      let ended = false;
      const end = (): IteratorResult<U> => {
        ended = true;
        return { done: true, value: undefined };
      };
      return {
        next: () => {
          if (ended) return Promise.resolve(end());
          return iterator.next().then(
            (result) => {
              if (result.done) return end();
              try {
                return { done: false, value: map(result.value) };
              } catch (error) {
                end();
                iterator.return?.().catch(() => undefined);
                throw fail(error);
              }
            },
            (error: unknown) => {
              end();
              throw fail(error);
            },
          );
        },
        return: async (value?: unknown) => {
          if (!ended) {
            ended = true;
            await iterator.return?.(value);
          }
          return { done: true, value: undefined };
        },
      };
    },
  };
}
