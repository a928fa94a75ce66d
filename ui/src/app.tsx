import { AuthGate, forgetToken } from "./components/auth-gate.js";
import { LiveResourcesProvider, useLiveResources } from "./components/live-resources.js";
import { useRoute } from "./components/use-route.js";
import { readToken } from "./api/token.js";
import type { Route, ViewName } from "./lib/url-state.js";
import { ApoView } from "./views/apo-view.js";
import { OverviewView } from "./views/overview-view.js";
import { ResourcesView } from "./views/resources-view.js";
import { RolloutView } from "./views/rollout-view.js";
import { RolloutsView } from "./views/rollouts-view.js";
import { TrainingView } from "./views/training-view.js";

const NAV: { view: ViewName; label: string; href: string }[] = [
  { view: "overview", label: "Overview", href: "#/" },
  { view: "rollouts", label: "Rollouts", href: "#/rollouts" },
  { view: "resources", label: "Resources", href: "#/resources" },
  { view: "training", label: "Training", href: "#/training" },
  { view: "apo", label: "APO", href: "#/apo" },
];

export function App() {
  return (
    <AuthGate>
      <LiveResourcesProvider>
        <Shell />
      </LiveResourcesProvider>
    </AuthGate>
  );
}

function Shell() {
  const route = useRoute();
  const { live } = useLiveResources();
  const current = route.view === "rollout" ? "rollouts" : route.view;
  return (
    <div className="shell">
      <nav className="nav" data-testid="app-nav">
        <span className="brand">agl</span>
        {NAV.map((item) => (
          <a key={item.view} href={item.href} data-testid={`nav-${item.view}`} aria-current={current === item.view ? "page" : undefined}>
            {item.label}
          </a>
        ))}
        <span className="spacer" />
        <span className={`live ${live ? "on" : "off"}`} data-testid="live-indicator" data-live={String(live)} title="WatchResources stream">
          {live ? "● live" : "○ reconnecting"}
        </span>
        {readToken() === undefined ? null : (
          <button type="button" className="link" data-testid="auth-forget" onClick={forgetToken}>
            Forget token
          </button>
        )}
      </nav>
      <main className="main">
        <View route={route} />
      </main>
    </div>
  );
}

function View({ route }: { route: Route }) {
  switch (route.view) {
    case "overview":
      return <OverviewView />;
    case "rollouts":
      return <RolloutsView query={route.query} />;
    case "rollout":
      // Keyed: another rollout starts with fresh state (it may still be running when the last one had finished).
      return <RolloutView key={route.rolloutId} rolloutId={route.rolloutId} attemptId={route.attemptId} />;
    case "resources":
      return <ResourcesView id={route.id} page={route.page} a={route.a} b={route.b} />;
    case "training":
      return <TrainingView resourcesId={route.resourcesId} />;
    case "apo":
      return <ApoView runId={route.runId} />;
    case "not-found":
      return (
        <section data-testid="view-not-found">
          <h2>Nothing at /{route.path}</h2>
          <a href="#/">Back to the overview</a>
        </section>
      );
  }
}
