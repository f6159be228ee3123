package charttest

import (
	"sort"
	"strings"
	"testing"

	"uplink/chart/helmlite"
)

// rule is a PolicyRule in a canonical, comparable form.
type rule struct {
	apiGroups, resources, resourceNames, verbs, nonResourceURLs string
}

func canonicalRules(t *testing.T, rules interface{}) []rule {
	t.Helper()
	join := func(v interface{}) string {
		var items []string
		for _, item := range asList(v) {
			items = append(items, asString(item))
		}
		sort.Strings(items)
		return strings.Join(items, ",")
	}
	var out []rule
	for _, raw := range asList(rules) {
		r := asMap(raw)
		for key := range r {
			switch key {
			case "apiGroups", "resources", "resourceNames", "verbs", "nonResourceURLs":
			default:
				t.Errorf("rule has an unexpected field %q: %s", key, toJSON(r))
			}
		}
		out = append(out, rule{join(r["apiGroups"]), join(r["resources"]), join(r["resourceNames"]),
			join(r["verbs"]), join(r["nonResourceURLs"])})
	}
	sort.Slice(out, func(i, j int) bool { return toJSON(out[i]) < toJSON(out[j]) })
	return out
}

func expectRules(t *testing.T, what string, got interface{}, want []rule) {
	t.Helper()
	sort.Slice(want, func(i, j int) bool { return toJSON(want[i]) < toJSON(want[j]) })
	gotRules := canonicalRules(t, got)
	if len(gotRules) != len(want) {
		t.Errorf("%s: %d rules, want %d:\n got %+v\nwant %+v", what, len(gotRules), len(want), gotRules, want)
		return
	}
	for i := range want {
		if gotRules[i] != want[i] {
			t.Errorf("%s: rule %d\n got %+v\nwant %+v", what, i, gotRules[i], want[i])
		}
	}
}

// The observability guide's ClusterRole, and nothing more.
var clusterRoleRules = []rule{
	{apiGroups: "", resources: "events,namespaces,nodes,pods", verbs: "get,list,watch"},
	{apiGroups: "", resources: "pods/log", verbs: "get"},
	{apiGroups: "apps", resources: "deployments,statefulsets", verbs: "get,list"},
	{apiGroups: "metrics.k8s.io", resources: "nodes,pods", verbs: "get,list"},
}

// The workspace controller's Role, in the workload namespace only: its pods, their exec, the
// drain marker and the guards it verifies.
var workspaceRoleRules = []rule{
	{apiGroups: "", resources: "pods", verbs: "create,delete,get,list,watch"},
	{apiGroups: "", resources: "pods/exec", verbs: "create,get"},
	{apiGroups: "", resources: "configmaps", verbs: "create"},
	{apiGroups: "", resources: "configmaps", resourceNames: "uplink-workspace-drain", verbs: "delete,get"},
	{apiGroups: "", resources: "limitranges,resourcequotas", verbs: "list"},
	{apiGroups: "networking.k8s.io", resources: "networkpolicies", verbs: "list"},
}

// Cluster-wide, only the named reads of its start-up checks.
var workspaceClusterRules = []rule{
	{apiGroups: "", resources: "namespaces", resourceNames: "kube-system,uplink-workspaces", verbs: "get"},
	{apiGroups: "scheduling.k8s.io", resources: "priorityclasses", resourceNames: "uplink-workspace", verbs: "get"},
	{apiGroups: "admissionregistration.k8s.io", resources: "validatingadmissionpolicies,validatingadmissionpolicybindings",
		resourceNames: "uplink-workspace", verbs: "get"},
	{nonResourceURLs: "/version", verbs: "get"},
}

func executionEnabled(result *helmlite.Result) bool {
	return asMap(result.Values["execution"])["enabled"] == true
}

func inventoryClusterRules() []rule {
	return []rule{
		{apiGroups: "", resources: "nodes", verbs: "list"},
		{apiGroups: "", resources: "namespaces", resourceNames: "kube-system", verbs: "get"},
	}
}

// Every Role and ClusterRole the chart makes, every binding, and who is bound: exactly the
// issue's rule sets, in every combination of values.
func TestRBACRulesAreExactlyTheListedOnes(t *testing.T) {
	chart := loadChart(t)
	for _, c := range matrix {
		result := render(t, chart, c)
		full := fullname(c)
		ns := c.namespaceName()
		inventoryCluster := ns + "-" + full + "-inventory"
		clusterCluster := ns + "-" + full + "-cluster"

		workspaceCluster := ns + "-" + full + "-workspace"

		roles := byKind(result, "Role")
		wantRoles := []string{full + "-inventory"}
		if executionEnabled(result) {
			wantRoles = append(wantRoles, full+"-workspace")
		}
		if strings.Join(names(roles), " ") != strings.Join(wantRoles, " ") {
			t.Fatalf("case %s: Roles %v, want %v", c.name, names(roles), wantRoles)
		}
		for _, role := range roles {
			if get(role, "metadata", "name") == full+"-workspace" {
				if get(role, "metadata", "namespace") != "uplink-workspaces" {
					t.Errorf("case %s: the workspace Role is in %v, not the workload namespace", c.name, get(role, "metadata", "namespace"))
				}
				expectRules(t, c.name+" workspace Role", role["rules"], append([]rule(nil), workspaceRoleRules...))
				continue
			}
			expectRules(t, c.name+" inventory Role", role["rules"], []rule{
				{apiGroups: "", resources: "configmaps", resourceNames: full + "-status", verbs: "patch"},
			})
		}

		clusterRoles := byKind(result, "ClusterRole")
		wantClusterRoles := []string{inventoryCluster}
		if kubernetesEnabled(result) {
			wantClusterRoles = append(wantClusterRoles, clusterCluster)
		}
		if executionEnabled(result) {
			wantClusterRoles = append(wantClusterRoles, workspaceCluster)
		}
		sort.Strings(wantClusterRoles)
		if strings.Join(names(clusterRoles), " ") != strings.Join(wantClusterRoles, " ") {
			t.Fatalf("case %s: ClusterRoles %v, want %v", c.name, names(clusterRoles), wantClusterRoles)
		}
		for _, role := range clusterRoles {
			switch get(role, "metadata", "name") {
			case inventoryCluster:
				expectRules(t, c.name+" inventory ClusterRole", role["rules"], inventoryClusterRules())
			case clusterCluster:
				expectRules(t, c.name+" cluster ClusterRole", role["rules"], append([]rule(nil), clusterRoleRules...))
			case workspaceCluster:
				expectRules(t, c.name+" workspace ClusterRole", role["rules"], append([]rule(nil), workspaceClusterRules...))
			}
			if _, aggregated := role["aggregationRule"]; aggregated {
				t.Errorf("case %s: ClusterRole %s aggregates other roles", c.name, get(role, "metadata", "name"))
			}
		}

		// Bindings: each role bound to its own service account, and nothing bound to the
		// node's service account.
		type binding struct{ kind, role, subject string }
		var gotBindings []binding
		for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
			for _, b := range byKind(result, kind) {
				subjects := asList(b["subjects"])
				if len(subjects) != 1 {
					t.Errorf("case %s: %s %s has %d subjects", c.name, kind, get(b, "metadata", "name"), len(subjects))
					continue
				}
				s := asMap(subjects[0])
				if s["kind"] != "ServiceAccount" || s["namespace"] != ns {
					t.Errorf("case %s: %s subject %s", c.name, kind, toJSON(s))
				}
				gotBindings = append(gotBindings, binding{kind, asString(get(b, "roleRef", "kind")) + "/" +
					asString(get(b, "roleRef", "name")), asString(s["name"])})
			}
		}
		wantBindings := []binding{
			{"RoleBinding", "Role/" + full + "-inventory", full + "-inventory"},
			{"ClusterRoleBinding", "ClusterRole/" + inventoryCluster, full + "-inventory"},
		}
		if kubernetesEnabled(result) {
			wantBindings = append(wantBindings, binding{"ClusterRoleBinding", "ClusterRole/" + clusterCluster, full + "-cluster"})
		}
		if executionEnabled(result) {
			wantBindings = append(wantBindings,
				binding{"RoleBinding", "Role/" + full + "-workspace", full + "-workspace"},
				binding{"ClusterRoleBinding", "ClusterRole/" + workspaceCluster, full + "-workspace"})
		}
		sortBindings := func(b []binding) {
			sort.Slice(b, func(i, j int) bool { return toJSON(b[i]) < toJSON(b[j]) })
		}
		sortBindings(gotBindings)
		sortBindings(wantBindings)
		if toJSON(gotBindings) != toJSON(wantBindings) {
			t.Errorf("case %s: bindings\n got %+v\nwant %+v", c.name, gotBindings, wantBindings)
		}
	}
}

// Whatever the rule sets above say, nothing anywhere grants a write verb, a wildcard, or
// anything on Secrets, Services, proxies, exec, attach, port-forward or impersonation; but for
// the workspace controller's Role, confined to the workload namespace (whose admission policy
// admits only workspace pods), whose exact rules TestRBACRulesAreExactlyTheListedOnes checks,
// and its ClusterRole's one non-resource URL, /version.
func TestNoRoleGrantsForbiddenAccess(t *testing.T) {
	chart := loadChart(t)
	forbiddenVerbs := map[string]bool{"create": true, "update": true, "delete": true,
		"deletecollection": true, "impersonate": true, "escalate": true, "bind": true, "*": true}
	for _, c := range matrix {
		result := render(t, chart, c)
		for _, role := range append(byKind(result, "Role"), byKind(result, "ClusterRole")...) {
			name := asString(get(role, "metadata", "name"))
			if role["kind"] == "Role" && name == fullname(c)+"-workspace" {
				if get(role, "metadata", "namespace") == c.namespaceName() {
					t.Errorf("case %s: the workspace Role's writes reach the release namespace", c.name)
				}
				continue
			}
			workspaceClusterRole := role["kind"] == "ClusterRole" && name == c.namespaceName()+"-"+fullname(c)+"-workspace"
			for _, raw := range asList(role["rules"]) {
				r := asMap(raw)
				for _, verb := range asList(r["verbs"]) {
					v := asString(verb)
					// patch is the inventory role's one write, limited to its status ConfigMap.
					if forbiddenVerbs[v] || (v == "patch" && toJSON(r["resourceNames"]) != `["`+fullname(c)+`-status"]`) {
						t.Errorf("case %s: %s grants %q: %s", c.name, get(role, "metadata", "name"), v, toJSON(r))
					}
				}
				for _, resource := range asList(r["resources"]) {
					res := asString(resource)
					if res == "*" || res == "secrets" || res == "services" || strings.HasSuffix(res, "/proxy") ||
						res == "pods/exec" || res == "pods/attach" || res == "pods/portforward" ||
						res == "users" || res == "groups" || res == "serviceaccounts" || res == "serviceaccounts/token" {
						t.Errorf("case %s: %s grants access to %q", c.name, get(role, "metadata", "name"), res)
					}
				}
				for _, group := range asList(r["apiGroups"]) {
					if asString(group) == "*" {
						t.Errorf("case %s: %s grants every API group", c.name, get(role, "metadata", "name"))
					}
				}
				if urls, ok := r["nonResourceURLs"]; ok && !(workspaceClusterRole && toJSON(urls) == `["/version"]`) {
					t.Errorf("case %s: %s grants non-resource URLs", c.name, get(role, "metadata", "name"))
				}
			}
		}
	}
}

// Service accounts: one per workload, none automounted by default; only the pods that use
// the API mount a token, and the node pod runs under its own account with no token.
func TestServiceAccountsAndTokenMounts(t *testing.T) {
	chart := loadChart(t)
	for _, c := range matrix {
		result := render(t, chart, c)
		full := fullname(c)
		for _, sa := range byKind(result, "ServiceAccount") {
			if sa["automountServiceAccountToken"] != false {
				t.Errorf("case %s: ServiceAccount %s automounts its token", c.name, get(sa, "metadata", "name"))
			}
		}
		for _, w := range workloads(result) {
			spec := podSpec(w)
			component := componentOf(w)
			if spec["serviceAccountName"] != full+"-"+component {
				t.Errorf("case %s: %s runs as %v", c.name, component, spec["serviceAccountName"])
			}
			// The node and experiments roles have no use for the API.
			wantMount := component != "node" && component != "experiments"
			if spec["automountServiceAccountToken"] != wantMount {
				t.Errorf("case %s: %s automountServiceAccountToken %v, want %v", c.name, component,
					spec["automountServiceAccountToken"], wantMount)
			}
		}
	}
}

func fullname(c renderCase) string {
	if c.name == "custom-names" {
		return "gpu-reporter"
	}
	if strings.Contains(c.releaseName(), "uplink-agent") {
		return c.releaseName()
	}
	return c.releaseName() + "-uplink-agent"
}

func kubernetesEnabled(result *helmlite.Result) bool {
	return asMap(result.Values["kubernetes"])["enabled"] == true
}

func names(objects []object) []string {
	var out []string
	for _, o := range objects {
		out = append(out, asString(get(o, "metadata", "name")))
	}
	sort.Strings(out)
	return out
}
