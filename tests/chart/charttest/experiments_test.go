package charttest

import (
	"strings"
	"testing"

	"uplink/chart/helmlite"
)

// The experiments role is installed as the <release> Deployment when a scanner that config
// leaves on has somewhere to look, with exactly the arguments and read-only mounts that
// describe it, and no Kubernetes access.
func TestExperimentsDeploymentScansWhatItIsGiven(t *testing.T) {
	chart := loadChart(t)
	for _, c := range []struct {
		name string
		args string
	}{
		{"experiments-volumes", `["experiments", "--console=https://console.example.com",
			"--token-file=/var/run/secrets/uplink/token", "--log-level=info", "--listen=0.0.0.0:8081",
			"--state-dir=/var/lib/uplink-agent/experiments", "--interval=30s", "--enable-mlflow=true",
			"--enable-wandb=true", "--mlflow-dir=/scan/mlflow/mlruns", "--wandb-dir=/scan/wandb",
			"--wandb-stale-after=10m"]`},
		{"experiments-server", `["experiments", "--console=https://console.example.com",
			"--token-file=/var/run/secrets/uplink/token", "--log-level=info", "--listen=0.0.0.0:8081",
			"--state-dir=/var/lib/uplink-agent/experiments", "--interval=1m", "--enable-mlflow=true",
			"--enable-wandb=true", "--mlflow-uri=https://mlflow.ml.svc:5443/tracking",
			"--mlflow-token-file=/var/run/secrets/mlflow/credential",
			"--mlflow-ca-file=/etc/uplink/mlflow-ca/ca.crt", "--wandb-dir=/scan/wandb",
			"--wandb-stale-after=30m"]`},
	} {
		var renderCase renderCase
		for _, m := range matrix {
			if m.name == c.name {
				renderCase = m
			}
		}
		result := render(t, chart, renderCase)
		deployment := find(t, result, "Deployment", "uplink-agent")
		if componentOf(deployment) != "experiments" {
			t.Errorf("%s: the <release> Deployment is %q", c.name, componentOf(deployment))
		}
		spec := podSpec(deployment)
		container := asMap(asList(spec["containers"])[0])
		if !sameJSON(t, container["args"], c.args) {
			t.Errorf("%s: args %s", c.name, toJSON(container["args"]))
		}
		if get(deployment, "spec", "strategy", "type") != "Recreate" {
			t.Errorf("%s: strategy %s", c.name, toJSON(get(deployment, "spec", "strategy")))
		}
		for _, raw := range asList(container["volumeMounts"]) {
			m := asMap(raw)
			if strings.HasPrefix(asString(m["name"]), "scan-") && m["readOnly"] != true {
				t.Errorf("%s: %s is writable", c.name, m["name"])
			}
		}
		for _, raw := range asList(spec["volumes"]) {
			v := asMap(raw)
			if claim := asMap(v["persistentVolumeClaim"]); claim != nil &&
				strings.HasPrefix(asString(v["name"]), "scan-") && claim["readOnly"] != true {
				t.Errorf("%s: claim %s is not read-only", c.name, v["name"])
			}
		}
		find(t, result, "ServiceAccount", "uplink-agent-experiments")
		for _, kind := range []string{"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} {
			for _, o := range byKind(result, kind) {
				if strings.Contains(toJSON(o), "experiments") {
					t.Errorf("%s: %s %s grants the experiments role something", c.name, kind, get(o, "metadata", "name"))
				}
			}
		}
	}
	server := render(t, chart, renderCase{name: "server-ca", values: `
experiments: {mlflow: {trackingUri: "https://mlflow.example", caBundle: "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----"}}`})
	if ca := find(t, server, "ConfigMap", "uplink-agent-mlflow-ca"); !strings.Contains(asString(get(ca, "data", "ca.crt")), "BEGIN CERTIFICATE") {
		t.Errorf("mlflow CA ConfigMap %s", toJSON(ca))
	}
	var secret object
	for _, raw := range asList(podSpec(find(t, render(t, chart, renderCase{name: "basic", values: `
experiments: {mlflow: {trackingUri: "https://mlflow.example", credentialSecret: creds, basicAuthKey: auth}}`}),
		"Deployment", "uplink-agent"))["volumes"]) {
		if asMap(raw)["name"] == "mlflow-credential" {
			secret = asMap(raw)
		}
	}
	if !sameJSON(t, secret["secret"], `{"secretName": "creds", "defaultMode": 288, "items": [{"key": "auth", "path": "credential"}]}`) {
		t.Errorf("credential volume %s", toJSON(secret))
	}
}

// Turned off, or with nowhere to look, there is no experiments Deployment, and a scanner that
// is off is never passed its place.
func TestExperimentsOffOrNowhereToScanInstallsNothing(t *testing.T) {
	chart := loadChart(t)
	for _, c := range []renderCase{{name: "defaults"}, {name: "experiments-off", values: matrixValues("experiments-off")}} {
		result := render(t, chart, c)
		for _, name := range inventoryOf(result) {
			if strings.Contains(name, "experiments") || name == "Deployment/uplink-agent" {
				t.Errorf("%s: renders %s", c.name, name)
			}
		}
	}
	onlyWandb := render(t, chart, renderCase{name: "only-wandb", values: `
config: {enableMlflow: false}
experiments:
  mlflow: {trackingUri: "https://mlflow.example"}
  wandb: {volume: {persistentVolumeClaim: runs}}`})
	args := toJSON(asMap(asList(podSpec(find(t, onlyWandb, "Deployment", "uplink-agent"))["containers"])[0])["args"])
	if strings.Contains(args, "mlflow.example") || !strings.Contains(args, `"--enable-mlflow=false"`) {
		t.Errorf("the MLflow scanner is off but: %s", args)
	}
	for _, m := range byKind(onlyWandb, "NetworkPolicy") {
		if strings.Contains(toJSON(m), "443") && componentOf(m) == "experiments" &&
			len(asList(get(m, "spec", "egress"))) != 2 {
			t.Errorf("the MLflow server is still allowed: %s", toJSON(get(m, "spec", "egress")))
		}
	}
}

// Values the role would refuse are refused at install time, saying why.
func TestExperimentsRefusesContradictions(t *testing.T) {
	chart := loadChart(t)
	for _, c := range []struct{ name, values, want string }{
		{"server and volume", `experiments: {mlflow: {trackingUri: "https://m.example", volume: {persistentVolumeClaim: runs}}}`,
			"give a trackingUri or a volume, not both"},
		{"claim and host path", `experiments: {wandb: {volume: {persistentVolumeClaim: runs, hostPath: /data}}}`,
			"a persistentVolumeClaim or a hostPath, not both"},
		{"escaping subPath", `experiments: {wandb: {volume: {persistentVolumeClaim: runs, subPath: "a/../../etc"}}}`,
			"leaves its volume"},
		{"secret without key", `experiments: {mlflow: {trackingUri: "https://m.example", credentialSecret: creds}}`,
			"needs tokenKey (a bearer token) or basicAuthKey"},
	} {
		_, err := helmlite.Render(chart, helmlite.Options{
			ReleaseName: "uplink-agent", Namespace: "uplink", Values: userValues(t, requiredValues, c.values),
		})
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		containsAll(t, c.name, err.Error(), c.want)
	}
}

func matrixValues(name string) string {
	for _, c := range matrix {
		if c.name == name {
			return c.values
		}
	}
	return ""
}
