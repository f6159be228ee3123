package helmlite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeChart makes a chart directory from file name -> text.
func writeChart(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const testChartYAML = "apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: \"4.5\"\nkubeVersion: \">=1.28.0-0\"\n"

func renderFiles(t *testing.T, templates map[string]string, values string, opts Options) (*Result, error) {
	t.Helper()
	files := map[string]string{"Chart.yaml": testChartYAML, "values.yaml": values}
	for name, text := range templates {
		files["templates/"+name] = text
	}
	chart, err := LoadChart(writeChart(t, files))
	if err != nil {
		t.Fatalf("LoadChart: %v", err)
	}
	if opts.ReleaseName == "" {
		opts.ReleaseName = "rel"
	}
	if opts.Namespace == "" {
		opts.Namespace = "ns"
	}
	return Render(chart, opts)
}

func TestBuiltInObjects(t *testing.T) {
	result, err := renderFiles(t, map[string]string{"cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-{{ .Chart.Name }}
  namespace: {{ .Release.Namespace }}
data:
  chart: {{ .Chart.Version }}/{{ .Chart.AppVersion }}
  kube: {{ .Capabilities.KubeVersion.Version }} {{ .Capabilities.KubeVersion.Major }}.{{ .Capabilities.KubeVersion.Minor }}
  install: {{ .Release.IsInstall | quote }}
  service: {{ .Release.Service }}
  template: {{ .Template.Name }} {{ .Template.BasePath }}
  missing: "{{ .Values.nothing }}"
`}, "", Options{KubeVersion: "1.31.2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(result.Manifests) != 1 {
		t.Fatalf("%d manifests", len(result.Manifests))
	}
	m := result.Manifests[0]
	want := `chart: 1.2.3/4.5
  kube: v1.31.2 1.31
  install: "true"
  service: Helm
  template: demo/templates/cm.yaml demo/templates
  missing: ""`
	if !strings.Contains(m.Content, want) || m.Name() != "rel-demo" || m.Kind() != "ConfigMap" {
		t.Errorf("rendered:\n%s", m.Content)
	}
}

func TestHelmFunctions(t *testing.T) {
	result, err := renderFiles(t, map[string]string{
		"_helpers.tpl": `{{- define "demo.label" -}}app: {{ .name }}{{- end }}`,
		"cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: fns
  labels:
    {{- include "demo.label" (dict "name" "x") | nindent 4 }}
data:
  yaml: {{ toYaml .Values.list | quote }}
  json: {{ toJson .Values.map | quote }}
  fromYaml: {{ (fromYaml "a: 1").a | quote }}
  fromYamlError: {{ hasKey (fromYaml "a: [") "Error" | quote }}
  fromJson: {{ (fromJson "{\"k\": \"v\"}").k }}
  tpl: {{ tpl .Values.template . | quote }}
  lookup: {{ lookup "v1" "Secret" "ns" "s" | len | quote }}
  required: {{ required "not shown" .Values.present }}
  sprig: {{ "abc" | upper }} {{ semverCompare ">=1.2.0" "1.3.0" }}
`}, `list: [a, b]
map: {k: 1}
template: "{{ .Release.Name }}-{{ include \"demo.label\" (dict \"name\" \"y\") }}"
present: here
`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	content := result.Manifests[0].Content
	for _, want := range []string{
		"app: x", `yaml: "- a\n- b"`, `json: "{\"k\":1}"`, `fromYaml: "1"`, `fromYamlError: "true"`,
		"fromJson: v", `tpl: "rel-app: y"`, `lookup: "0"`, "required: here", "sprig: ABC true",
	} {
		if !strings.Contains(content, want) {
			t.Errorf("missing %q in:\n%s", want, content)
		}
	}
}

// Templates must not read the renderer's environment (Helm removes env and expandenv).
func TestEnvironmentFunctionsAreAbsent(t *testing.T) {
	for _, fn := range []string{"env", "expandenv"} {
		_, err := renderFiles(t, map[string]string{"x.yaml": `{{ ` + fn + ` "HOME" }}`}, "", Options{})
		if err == nil || !strings.Contains(err.Error(), `function "`+fn+`" not defined`) {
			t.Errorf("%s: %v", fn, err)
		}
	}
}

func TestFailAndRequiredReportHelmStyle(t *testing.T) {
	_, err := renderFiles(t, map[string]string{
		"_helpers.tpl": "{{- define \"demo.check\" -}}\n{{- required \"x.y is required\" .Values.x }}\n{{- end }}",
		"a.yaml":       "kind: A\n{{ include \"demo.check\" . }}\n",
	}, "", Options{})
	if err == nil || err.Error() != "execution error at (demo/templates/_helpers.tpl:2:4): x.y is required" {
		t.Errorf("required: %v", err)
	}
	_, err = renderFiles(t, map[string]string{"b.yaml": "\n\n  {{ fail \"no can do\" }}"}, "", Options{})
	if err == nil || err.Error() != "execution error at (demo/templates/b.yaml:3:5): no can do" {
		t.Errorf("fail: %v", err)
	}
	if _, err := renderFiles(t, map[string]string{"c.yaml": "{{ required \"empty\" \"\" }}"}, "", Options{}); err == nil {
		t.Error("required accepted an empty string")
	}
}

func TestRecursionIsBounded(t *testing.T) {
	_, err := renderFiles(t, map[string]string{
		"_helpers.tpl": `{{- define "loop" -}}{{ include "loop" . }}{{- end }}`,
		"a.yaml":       `{{ include "loop" . }}`,
	}, "", Options{})
	if err == nil || !strings.Contains(err.Error(), "nested reference name: loop") {
		t.Errorf("include recursion: %v", err)
	}
	_, err = renderFiles(t, map[string]string{"a.yaml": `{{ tpl .Values.t . }}`},
		`t: "{{ tpl .Values.t . }}"`, Options{})
	if err == nil || !strings.Contains(err.Error(), "tpl nested too deeply") {
		t.Errorf("tpl recursion: %v", err)
	}
}

func TestOutputIsSplitParsedAndOrdered(t *testing.T) {
	result, err := renderFiles(t, map[string]string{
		"a.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\n# only a comment\n---\n\n" +
			"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n",
		"b.yaml": "apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: ns1}\n",
		"c.yaml": "{{- if false }}\napiVersion: v1\nkind: Secret\n{{- end }}\n",
	}, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, m := range result.Manifests {
		order = append(order, m.Kind()+"/"+m.Name())
	}
	if got := strings.Join(order, " "); got != "Namespace/ns1 ServiceAccount/sa Deployment/d Widget/w" {
		t.Errorf("order %s", got)
	}
	formatted := FormatYAML(result.Manifests)
	if !strings.HasPrefix(formatted, "---\n# Source: demo/templates/b.yaml\napiVersion: v1\nkind: Namespace") {
		t.Errorf("format:\n%s", formatted)
	}
}

func TestMalformedOutputIsRefused(t *testing.T) {
	cases := map[string]string{
		"x.yaml: [":                            "YAML parse error on demo/templates/x.yaml",
		"kind: ConfigMap\nmetadata: {name: a}": "object has no apiVersion",
		"apiVersion: v1\nmetadata: {name: a}":  "object has no kind",
		"apiVersion: v1\nkind: ConfigMap":      "ConfigMap has no metadata.name",
	}
	for text, want := range cases {
		_, err := renderFiles(t, map[string]string{"x.yaml": text}, "", Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v (want %q)", text, err, want)
		}
	}
	if _, err := renderFiles(t, map[string]string{"x.yaml": "{{ .Values.a"}, "", Options{}); err == nil {
		t.Error("a template that does not parse was rendered")
	}
}

func TestKubeVersionAndReleaseChecks(t *testing.T) {
	_, err := renderFiles(t, nil, "", Options{KubeVersion: "v1.27.9"})
	if err == nil || err.Error() != "chart requires kubeVersion: >=1.28.0-0 which is incompatible with Kubernetes v1.27.9" {
		t.Errorf("kubeVersion gate: %v", err)
	}
	if _, err := renderFiles(t, nil, "", Options{KubeVersion: "one.two"}); err == nil {
		t.Error("a malformed --kube-version was accepted")
	}
	for _, name := range []string{"Bad", "-x", strings.Repeat("a", 54), "a_b"} {
		if _, err := renderFiles(t, nil, "", Options{ReleaseName: name}); err == nil {
			t.Errorf("release name %q accepted", name)
		}
	}
}

func TestSchemaValidationMessages(t *testing.T) {
	schema := `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
		"additionalProperties": false,
		"properties": {"url": {"type": "string", "pattern": "^https://"}, "count": {"type": "integer"}}}`
	chart, err := LoadChart(writeChart(t, map[string]string{
		"Chart.yaml": testChartYAML, "values.yaml": "url: https://x\ncount: 1\n", "values.schema.json": schema,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Render(chart, Options{ReleaseName: "r", Namespace: "n"}); err != nil {
		t.Errorf("valid values refused: %v", err)
	}
	_, err = Render(chart, Options{ReleaseName: "r", Namespace: "n", Values: map[string]interface{}{
		"url": "http://x", "count": "one", "extra": true,
	}})
	want := []string{
		"values don't meet the specifications of the schema(s) in the following chart(s):\ndemo:\n",
		"- (root): Additional property extra is not allowed",
		"- url: Does not match pattern '^https://'",
		"- count: Invalid type. Expected: integer, given: string",
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("schema error %v lacks %q", err, w)
		}
	}
	// Integers from --set (int64) and from YAML (float64) both satisfy "integer".
	if _, err := Render(chart, Options{ReleaseName: "r", Namespace: "n", Values: map[string]interface{}{"count": int64(3)}}); err != nil {
		t.Errorf("int64 refused: %v", err)
	}
	bad, err := LoadChart(writeChart(t, map[string]string{"Chart.yaml": testChartYAML, "values.schema.json": "{"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Render(bad, Options{ReleaseName: "r", Namespace: "n"}); err == nil {
		t.Error("a broken schema was accepted")
	}
}

func TestLoadChartRefusesWhatItCannotRender(t *testing.T) {
	cases := map[string]map[string]string{
		"no such file":                   {"values.yaml": ""},
		"apiVersion must be v2":          {"Chart.yaml": "apiVersion: v1\nname: x\nversion: 1.0.0\n"},
		"name is required":               {"Chart.yaml": "apiVersion: v2\nversion: 1.0.0\n"},
		"not semantic version":           {"Chart.yaml": "apiVersion: v2\nname: x\nversion: one\n"},
		"kubeVersion":                    {"Chart.yaml": "apiVersion: v2\nname: x\nversion: 1.0.0\nkubeVersion: \">>1\"\n"},
		"only application":               {"Chart.yaml": "apiVersion: v2\nname: x\nversion: 1.0.0\ntype: library\n"},
		"dependencies are not supported": {"Chart.yaml": "apiVersion: v2\nname: x\nversion: 1.0.0\ndependencies:\n- name: y\n"},
		"values.yaml":                    {"Chart.yaml": testChartYAML, "values.yaml": "- a list\n"},
		"larger than":                    {"Chart.yaml": testChartYAML, "templates/big.yaml": strings.Repeat("x", maxChartFileBytes+1)},
	}
	for want, files := range cases {
		_, err := LoadChart(writeChart(t, files))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}
