package helmlite

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// entry is one tar member: a regular file unless typeflag says otherwise.
type entry struct {
	name, text string
	typeflag   byte
}

func makeArchive(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zipped := gzip.NewWriter(&buf)
	writer := tar.NewWriter(zipped)
	for _, e := range entries {
		typeflag := e.typeflag
		if typeflag == 0 {
			typeflag = tar.TypeReg
		}
		header := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: typeflag}
		if typeflag == tar.TypeReg {
			header.Size = int64(len(e.text))
		}
		if typeflag == tar.TypeSymlink {
			header.Linkname = e.text
		}
		if err := writer.WriteHeader(header); err != nil {
			t.Fatal(err)
		}
		if typeflag == tar.TypeReg {
			if _, err := writer.Write([]byte(e.text)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := writer.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zipped.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var goodEntries = []entry{
	{name: "demo/", typeflag: tar.TypeDir},
	{name: "demo/Chart.yaml", text: testChartYAML},
	{name: "demo/values.yaml", text: "greeting: hi\n"},
	{name: "demo/README.md", text: "# demo\n"},
	{name: "demo/templates/cm.yaml", text: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  g: {{ .Values.greeting }}\n"},
}

func TestArchiveLoadsAndRendersLikeItsDirectory(t *testing.T) {
	chart, err := LoadArchive("demo-1.2.3.tgz", makeArchive(t, goodEntries...))
	if err != nil {
		t.Fatal(err)
	}
	result, err := Render(chart, Options{ReleaseName: "rel", Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if len(result.Manifests) != 1 || result.Manifests[0].Source != "demo/templates/cm.yaml" ||
		get(result.Manifests[0].Object, "data", "g") != "hi" {
		t.Errorf("rendered %+v", result.Manifests)
	}
}

func get(o map[string]interface{}, keys ...string) interface{} {
	var v interface{} = o
	for _, k := range keys {
		m, _ := v.(map[string]interface{})
		v = m[k]
	}
	return v
}

// Hostile and malformed archives are refused with a message that says why.
func TestArchiveRefusesWhatHelmWouldNotLoad(t *testing.T) {
	with := func(extra ...entry) []byte {
		return makeArchive(t, append(append([]entry{}, goodEntries...), extra...)...)
	}
	gzipped := func(data []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(data)
		w.Close()
		return buf.Bytes()
	}
	whole := makeArchive(t, goodEntries...)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"not gzip", []byte("plain text"), "not gzip"},
		{"not tar", gzipped([]byte(strings.Repeat("x", 1000))), "not a tar archive"},
		{"cut short", whole[:len(whole)/2], ""},
		{"escape", with(entry{name: "demo/../../etc/passwd", text: "x"}), "leaves the chart's directory"},
		{"absolute", with(entry{name: "/demo/templates/x.yaml", text: "x"}), "absolute"},
		{"symlink", with(entry{name: "demo/templates/link", text: "/etc/passwd", typeflag: tar.TypeSymlink}), "not a regular file"},
		{"two tops", with(entry{name: "other/Chart.yaml", text: testChartYAML}), "one top directory"},
		{"file at top", makeArchive(t, entry{name: "Chart.yaml", text: testChartYAML}), "outside the chart's directory"},
		{"twice", with(entry{name: "demo/values.yaml", text: "b: 2\n"}), "appears twice"},
		{"wrong top", makeArchive(t, entry{name: "x/Chart.yaml", text: testChartYAML}), "not the chart's name demo/"},
		{"no Chart.yaml", makeArchive(t, entry{name: "demo/values.yaml", text: "a: 1\n"}), "no Chart.yaml"},
		{"huge file", with(entry{name: "demo/templates/big.yaml", text: strings.Repeat("#", maxChartFileBytes+1)}), "larger than"},
	}
	for _, c := range cases {
		_, err := LoadArchive("demo-1.2.3.tgz", c.data)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.want)
		}
	}
}

const goodIndex = `apiVersion: v1
entries:
  demo:
  - apiVersion: "v2"
    appVersion: "4.5"
    created: "2027-01-01T00:00:00Z"
    description: ""
    digest: "DIGEST"
    kubeVersion: ">=1.28.0-0"
    name: "demo"
    urls:
    - "demo-1.2.3.tgz"
    version: "1.2.3"
generated: "2027-01-01T00:00:00Z"
`

func TestIndexListsTheArchiveAsHelmPullFindsIt(t *testing.T) {
	archive := makeArchive(t, goodEntries...)
	chart, err := LoadArchive("demo-1.2.3.tgz", archive)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(archive)
	digest := hex.EncodeToString(sum[:])
	load := func(text string) *IndexFile {
		index, err := LoadIndex([]byte(strings.Replace(text, "DIGEST", digest, 1)))
		if err != nil {
			t.Fatalf("LoadIndex: %v\n%s", err, text)
		}
		return index
	}
	if err := load(goodIndex).CheckListed("https://c.example/charts", chart, archive, "demo-1.2.3.tgz"); err != nil {
		t.Errorf("a correct index: %v", err)
	}
	// Helm resolves a relative URL against the repository URL; an absolute one stands.
	absolute := strings.Replace(goodIndex, `- "demo-1.2.3.tgz"`, `- "https://mirror.example/x/demo-1.2.3.tgz"`, 1)
	if err := load(absolute).CheckListed("https://c.example/charts", chart, archive, "demo-1.2.3.tgz"); err != nil {
		t.Errorf("an absolute URL: %v", err)
	}
	mismatches := map[string]string{
		"digest":      strings.Replace(goodIndex, "DIGEST", strings.Repeat("0", 64), 1),
		"URL":         strings.Replace(goodIndex, `- "demo-1.2.3.tgz"`, `- "demo-1.2.2.tgz"`, 1),
		"version":     strings.Replace(goodIndex, `version: "1.2.3"`, `version: "1.2.4"`, 1),
		"appVersion":  strings.Replace(goodIndex, `appVersion: "4.5"`, `appVersion: "4.6"`, 1),
		"kubeVersion": strings.Replace(goodIndex, `">=1.28.0-0"`, `">=1.29.0-0"`, 1),
	}
	for what, text := range mismatches {
		index, err := LoadIndex([]byte(strings.Replace(text, "DIGEST", digest, 1)))
		if err != nil {
			t.Fatalf("%s: LoadIndex: %v", what, err)
		}
		if err := index.CheckListed("https://c.example/charts", chart, archive, "demo-1.2.3.tgz"); err == nil {
			t.Errorf("a wrong %s was accepted", what)
		}
	}
}

// What Helm's strict index loader refuses, refused here too.
func TestIndexRefusesWhatHelmRefuses(t *testing.T) {
	cases := map[string]string{
		"empty":          "",
		"no apiVersion":  strings.Replace(goodIndex, "apiVersion: v1\n", "", 1),
		"unknown field":  strings.Replace(goodIndex, `    digest:`, "    sha: x\n    digest:", 1),
		"unknown top":    goodIndex + "extra: 1\n",
		"bad version":    strings.Replace(goodIndex, `version: "1.2.3"`, `version: "one"`, 1),
		"no URL":         strings.Replace(goodIndex, "    urls:\n    - \"demo-1.2.3.tgz\"\n", "", 1),
		"bad created":    strings.Replace(goodIndex, `created: "2027-01-01T00:00:00Z"`, `created: "yesterday"`, 1),
		"name mismatch":  strings.Replace(goodIndex, `name: "demo"`, `name: "other"`, 1),
		"no chart apiV":  strings.Replace(goodIndex, `  - apiVersion: "v2"`+"\n", "  -\n", 1),
		"not a mapping":  "- 1\n- 2\n",
		"unknown type":   strings.Replace(goodIndex, `    name: "demo"`, "    name: \"demo\"\n    type: plugin", 1),
		"entry not list": "apiVersion: v1\nentries:\n  demo: 3\n",
	}
	for name, text := range cases {
		if _, err := LoadIndex([]byte(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
