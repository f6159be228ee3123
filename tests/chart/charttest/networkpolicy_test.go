package charttest

import (
	"fmt"
	"testing"
)

// One NetworkPolicy per workload: no ingress (but /metrics from networkPolicy.metricsFrom),
// egress only to DNS, the console's port (only to consoleCIDRs when set), for the roles that
// use the API the API server's ports (only to apiServerCIDRs when set), and for the
// experiments role the MLflow tracking server's port (only to mlflowCIDRs when set).
func TestNetworkPoliciesAreExactlyAsDescribed(t *testing.T) {
	chart := loadChart(t)
	for _, c := range matrix {
		result := render(t, chart, c)
		var policies []object
		for _, policy := range byKind(result, "NetworkPolicy") {
			// The workload namespace's default deny is a guard of its own (TestExecution...).
			if get(policy, "metadata", "namespace") == c.namespaceName() {
				policies = append(policies, policy)
			} else if !sameJSON(t, policy["spec"], `{"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}`) {
				t.Errorf("case %s: workload namespace policy %s", c.name, toJSON(policy["spec"]))
			}
		}
		policyEnabled := asMap(result.Values["networkPolicy"])["enabled"] == true
		if !policyEnabled {
			if len(policies) != 0 {
				t.Errorf("case %s: networkPolicy.enabled=false still renders %v", c.name, names(policies))
			}
			continue
		}
		np := asMap(result.Values["networkPolicy"])
		consolePort := 443
		if c.name == "network-cidrs" {
			consolePort = 8443
		}
		if c.name == "ipv6-console" {
			consolePort = 9443
		}
		apiPorts := asList(asMap(result.Values["kubernetes"])["apiServerPorts"])

		covered := map[string]bool{}
		for _, policy := range policies {
			component := componentOf(policy)
			covered[component] = true
			where := fmt.Sprintf("case %s policy %s", c.name, get(policy, "metadata", "name"))
			if !sameJSON(t, get(policy, "spec", "podSelector"), fmt.Sprintf(`{"matchLabels": {
				"app.kubernetes.io/name": "uplink-agent", "app.kubernetes.io/instance": %q,
				"app.kubernetes.io/component": %q}}`, c.releaseName(), component)) {
				t.Errorf("%s: podSelector %s", where, toJSON(get(policy, "spec", "podSelector")))
			}
			if !sameJSON(t, get(policy, "spec", "policyTypes"), `["Ingress", "Egress"]`) {
				t.Errorf("%s: policyTypes %s", where, toJSON(get(policy, "spec", "policyTypes")))
			}
			wantIngress := `[]`
			if len(asList(np["metricsFrom"])) > 0 {
				wantIngress = `[{"from": ` + toJSON(np["metricsFrom"]) + `, "ports": [{"protocol": "TCP", "port": 8081}]}]`
			}
			if !sameJSON(t, get(policy, "spec", "ingress"), wantIngress) {
				t.Errorf("%s: ingress %s, want %s", where, toJSON(get(policy, "spec", "ingress")), wantIngress)
			}

			egress := `[{"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}`
			if component == "workspace" {
				// The controller: the API and the console where execution.json says they are.
				e := asMap(result.Values["execution"])
				api, console := asMap(e["kubernetesApi"]), asMap(e["console"])
				egress += fmt.Sprintf(`, {"ports": [{"protocol": "TCP", "port": %v}]%s}`, api["port"], ipBlocks(api["cidrs"]))
				egress += fmt.Sprintf(`, {"ports": [{"protocol": "TCP", "port": %v}]%s}]`, console["port"], ipBlocks(console["cidrs"]))
				if !sameJSON(t, get(policy, "spec", "egress"), egress) {
					t.Errorf("%s: egress\n got %s\nwant %s", where, toJSON(get(policy, "spec", "egress")), egress)
				}
				continue
			}
			egress += fmt.Sprintf(`, {"ports": [{"protocol": "TCP", "port": %d}]%s}`, consolePort, ipBlocks(np["consoleCIDRs"]))
			if component == "experiments" && c.name == "experiments-server" {
				egress += `, {"ports": [{"protocol": "TCP", "port": 5443}], "to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]}`
			}
			if component != "node" && component != "experiments" {
				var ports []string
				for _, p := range apiPorts {
					ports = append(ports, fmt.Sprintf(`{"protocol": "TCP", "port": %v}`, p))
				}
				egress += fmt.Sprintf(`, {"ports": [%s]%s}`, joinComma(ports), ipBlocks(np["apiServerCIDRs"]))
			}
			egress += "]"
			if !sameJSON(t, get(policy, "spec", "egress"), egress) {
				t.Errorf("%s: egress\n got %s\nwant %s", where, toJSON(get(policy, "spec", "egress")), egress)
			}
		}
		for _, w := range workloads(result) {
			if !covered[componentOf(w)] {
				t.Errorf("case %s: workload %s has no NetworkPolicy", c.name, get(w, "metadata", "name"))
			}
		}
		if len(policies) != len(workloads(result)) {
			t.Errorf("case %s: %d policies for %d workloads", c.name, len(policies), len(workloads(result)))
		}
	}
}

func ipBlocks(cidrs interface{}) string {
	list := asList(cidrs)
	if len(list) == 0 {
		return ""
	}
	var peers []string
	for _, cidr := range list {
		peers = append(peers, fmt.Sprintf(`{"ipBlock": {"cidr": %q}}`, cidr))
	}
	return `, "to": [` + joinComma(peers) + `]`
}

func joinComma(items []string) string {
	out := ""
	for i, item := range items {
		if i > 0 {
			out += ", "
		}
		out += item
	}
	return out
}
