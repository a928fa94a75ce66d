import { createContext, useContext } from "react";
import type { StoreClients } from "../api/store-client.js";

export interface StoreContextValue {
  clients: StoreClients;
  /** A call was refused for its token: the app asks for one again, showing the store's message. */
  unauthenticated: (message: string) => void;
}

export const StoreContext = createContext<StoreContextValue | undefined>(undefined);

/** The store clients of the app (inside the auth gate). */
export function useStore(): StoreContextValue {
  const value = useContext(StoreContext);
  if (value === undefined) throw new Error("useStore outside StoreContext");
  return value;
}
