package charttest

import "testing"

// The node role has no Kubernetes access, yet its uploads name their cluster (the cluster
// binding, docs/security.md): the kubelet mounts the clusterUID key of the status ConfigMap,
// which the inventory role writes, read-only, optional (the pods start before the key exists),
// and the agent reads the file --cluster-uid-file names.
func TestTheNodeRoleReadsTheClusterIdentityFromTheStatusConfigMap(t *testing.T) {
	for _, c := range matrix {
		result := render(t, loadChart(t), c)
		if !kubernetesEnabled(result) {
			continue
		}
		spec := podSpec(find(t, result, "DaemonSet", fullname(c)+"-node"))
		var volume map[string]interface{}
		for _, raw := range asList(spec["volumes"]) {
			if asMap(raw)["name"] == "cluster-identity" {
				volume = asMap(raw)
			}
		}
		if !sameJSON(t, volume, `{"name": "cluster-identity", "configMap": {
			"name": "`+fullname(c)+`-status", "optional": true, "defaultMode": 292,
			"items": [{"key": "clusterUID", "path": "clusterUID"}]}}`) {
			t.Errorf("case %s: cluster-identity volume %s", c.name, toJSON(volume))
		}
		container := asMap(asList(spec["containers"])[0])
		mounted := false
		for _, raw := range asList(container["volumeMounts"]) {
			m := asMap(raw)
			if m["name"] == "cluster-identity" {
				mounted = m["mountPath"] == "/var/run/uplink-cluster" && m["readOnly"] == true
			}
		}
		if !mounted {
			t.Errorf("case %s: the node container does not mount cluster-identity read-only at /var/run/uplink-cluster: %s",
				c.name, toJSON(container["volumeMounts"]))
		}
		found := false
		for _, arg := range asList(container["args"]) {
			found = found || arg == "--cluster-uid-file=/var/run/uplink-cluster/clusterUID"
		}
		if !found {
			t.Errorf("case %s: node args %s", c.name, toJSON(container["args"]))
		}
		find(t, result, "ConfigMap", fullname(c)+"-status")
	}
}
