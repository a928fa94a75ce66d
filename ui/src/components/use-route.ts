import { useEffect, useState } from "react";
import { formatRoute, parseRoute, type Route } from "../lib/url-state.js";

/** The route in the location hash, following back/forward and links. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener("hashchange", onChange);
    return () => window.removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

/** Goes to a route; `replace` keeps history clean for filter edits. */
export function navigate(route: Route, replace = false): void {
  const hash = formatRoute(route);
  if (window.location.hash === hash) return;
  if (replace) {
    window.history.replaceState(null, "", hash);
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  } else window.location.hash = hash;
}
