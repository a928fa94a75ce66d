/** Where the dashboard keeps the store token: this tab's session only, never in the URL or local storage. */
const KEY = "agl.token";

export function readToken(): string | undefined {
  try {
    return sessionStorage.getItem(KEY) || undefined;
  } catch {
    return undefined;
  }
}

export function saveToken(token: string | undefined): void {
  try {
    if (token === undefined || token === "") sessionStorage.removeItem(KEY);
    else sessionStorage.setItem(KEY, token);
  } catch {
    // Storage disabled (private mode, policy): the token lives for this page only.
  }
}
