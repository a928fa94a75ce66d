import { Code, ConnectError } from "@connectrpc/connect";

/** The store's errors are `ConnectError`s; these name the cases the store raises. */
export const notFound = (message: string) => new ConnectError(message, Code.NotFound);
export const invalidArgument = (message: string) => new ConnectError(message, Code.InvalidArgument);
export const failedPrecondition = (message: string) => new ConnectError(message, Code.FailedPrecondition);
export const resourceExhausted = (message: string) => new ConnectError(message, Code.ResourceExhausted);
export const outOfRange = (message: string) => new ConnectError(message, Code.OutOfRange);
