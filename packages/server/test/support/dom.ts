import { Window } from "happy-dom";

/**
 * A headless DOM for React tests: happy-dom's window, its document and storage put on the global
 * object before React DOM loads (import this module first). Node's own fetch, timers, events and
 * AbortController stay: the LangGraph SDK talks to a real server through them.
 */
export const page = new Window({ url: "http://localhost:3000/" });

const globals: Record<string, unknown> = {
  window: page,
  document: page.document,
  navigator: page.navigator,
  sessionStorage: page.sessionStorage,
  localStorage: page.localStorage,
  HTMLElement: page.HTMLElement,
  HTMLIFrameElement: page.HTMLIFrameElement,
  Element: page.Element,
  Node: page.Node,
  Text: page.Text,
  MutationObserver: page.MutationObserver,
  getComputedStyle: page.getComputedStyle.bind(page),
  IS_REACT_ACT_ENVIRONMENT: true,
};
for (const [key, value] of Object.entries(globals)) Object.defineProperty(globalThis, key, { value, configurable: true, writable: true });
