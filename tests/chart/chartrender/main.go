// chartrender renders a Helm chart like `helm template`, for machines without Helm:
//
//	chartrender [--release NAME] [--namespace NS] [--kube-version V] [-f VALUES.yaml]...
//	            [--set K=V]... [--set-string K=V]... [--set-file K=PATH]...
//	            [--show-only templates/FILE]... [--output yaml|json] [--notes]
//	            [--header TEXT] [--repo-index INDEX.yaml --repo-url URL] CHART
//
// CHART is a chart directory or a packaged chart (.tgz), as for `helm template`. With
// --repo-index the packaged chart must be listed in that repository index as `helm pull`
// from URL would find it (helmlite.CheckListed), or nothing is rendered.
//
// yaml prints the manifests as `helm template` does; json prints {"manifests": [{source,
// object}], "notes": "..."} for tests. Errors go to stderr as "Error: ..." with exit code 1;
// a wrong command line exits 2.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"uplink/chart/helmlite"
)

const (
	maxValuesFileBytes  = 4 << 20
	maxArchiveFileBytes = 8 << 20
)

// repeated collects a flag given several times, in order.
type repeated struct {
	kind  string
	items *[]setting
}

type setting struct {
	kind string // "file", "set", "set-string", "set-file"
	text string
}

func (r repeated) String() string { return "" }
func (r repeated) Set(value string) error {
	*r.items = append(*r.items, setting{kind: r.kind, text: value})
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("chartrender", flag.ContinueOnError)
	flags.SetOutput(stderr)
	release := flags.String("release", "uplink-agent", "release name")
	namespace := flags.String("namespace", "uplink", "release namespace")
	kubeVersion := flags.String("kube-version", helmlite.DefaultKubeVersion, "Kubernetes version the templates see")
	output := flags.String("output", "yaml", "yaml or json")
	notes := flags.Bool("notes", false, "print the rendered NOTES.txt after the manifests (yaml output)")
	header := flags.String("header", "", "a comment line printed first (yaml output)")
	repoIndex := flags.String("repo-index", "", "a repository's index.yaml that must list the packaged CHART")
	repoURL := flags.String("repo-url", "", "the repository's URL, for --repo-index")
	var settings []setting
	var showOnly []setting
	flags.Var(repeated{"show-only", &showOnly}, "show-only", "only the manifests of this template, e.g. templates/x.yaml (repeatable)")
	flags.Var(repeated{"file", &settings}, "f", "values file (repeatable; later ones win)")
	flags.Var(repeated{"file", &settings}, "values", "values file (repeatable)")
	flags.Var(repeated{"set", &settings}, "set", "K=V (repeatable)")
	flags.Var(repeated{"set-string", &settings}, "set-string", "K=V, V always a string (repeatable)")
	flags.Var(repeated{"set-file", &settings}, "set-file", "K=PATH, the file's text as the value (repeatable)")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	packaged := strings.HasSuffix(flags.Arg(0), ".tgz")
	if flags.NArg() != 1 || (*output != "yaml" && *output != "json") ||
		(*repoIndex != "") != (*repoURL != "") || (*repoIndex != "" && !packaged) {
		fmt.Fprintln(stderr, "usage: chartrender [flags] CHART_DIR|CHART.tgz (--output yaml or json; "+
			"--repo-index and --repo-url together, with a .tgz)")
		return 2
	}

	chart, err := loadChart(flags.Arg(0), packaged, *repoIndex, *repoURL)
	if err != nil {
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	userValues, err := collectValues(settings)
	if err != nil {
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	result, err := helmlite.Render(chart, helmlite.Options{
		ReleaseName: *release, Namespace: *namespace, KubeVersion: *kubeVersion, Values: userValues,
	})
	if err != nil {
		fmt.Fprintln(stderr, "Error:", err)
		return 1
	}
	if len(showOnly) > 0 {
		if result.Manifests, err = onlyFrom(chart.Metadata.Name, result.Manifests, showOnly); err != nil {
			fmt.Fprintln(stderr, "Error:", err)
			return 1
		}
	}
	if *output == "json" {
		type jsonManifest struct {
			Source string                 `json:"source"`
			Object map[string]interface{} `json:"object"`
		}
		out := struct {
			Manifests []jsonManifest `json:"manifests"`
			Notes     string         `json:"notes"`
		}{Manifests: []jsonManifest{}, Notes: result.Notes}
		for _, m := range result.Manifests {
			out.Manifests = append(out.Manifests, jsonManifest{m.Source, m.Object})
		}
		encoder := json.NewEncoder(stdout)
		encoder.SetIndent("", "  ")
		if err := encoder.Encode(out); err != nil {
			fmt.Fprintln(stderr, "Error:", err)
			return 1
		}
		return 0
	}
	if *header != "" {
		for _, line := range strings.Split(*header, "\n") {
			fmt.Fprintln(stdout, strings.TrimRight("# "+line, " "))
		}
	}
	fmt.Fprint(stdout, helmlite.FormatYAML(result.Manifests))
	if *notes {
		fmt.Fprint(stdout, "\nNOTES:\n"+result.Notes)
	}
	return 0
}

// loadChart reads a chart directory, or a packaged chart that, with an index, must be listed
// there.
func loadChart(arg string, packaged bool, indexFile, repositoryURL string) (*helmlite.Chart, error) {
	if !packaged {
		return helmlite.LoadChart(arg)
	}
	archive, err := readBounded(arg, maxArchiveFileBytes)
	if err != nil {
		return nil, err
	}
	chart, err := helmlite.LoadArchive(filepath.Base(arg), archive)
	if err != nil || indexFile == "" {
		return chart, err
	}
	data, err := readBounded(indexFile, maxValuesFileBytes)
	if err != nil {
		return nil, err
	}
	index, err := helmlite.LoadIndex(data)
	if err != nil {
		return nil, err
	}
	return chart, index.CheckListed(repositoryURL, chart, archive, filepath.Base(arg))
}

// onlyFrom keeps the manifests of the named templates (as Helm's --show-only), refusing a
// name that is no template of the chart or renders nothing.
func onlyFrom(chartName string, manifests []helmlite.Manifest, names []setting) ([]helmlite.Manifest, error) {
	var kept []helmlite.Manifest
	for _, name := range names {
		source := chartName + "/" + strings.TrimPrefix(name.text, chartName+"/")
		found := false
		for _, m := range manifests {
			if m.Source == source {
				kept = append(kept, m)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("could not find template %s in chart", name.text)
		}
	}
	return kept, nil
}

// collectValues applies -f files and --set flags in command-line order, as Helm does
// (files first in their order, then --set and friends in theirs).
func collectValues(settings []setting) (map[string]interface{}, error) {
	values := map[string]interface{}{}
	for _, s := range settings {
		if s.kind != "file" {
			continue
		}
		data, err := readFile(s.text)
		if err != nil {
			return nil, err
		}
		fileValues, err := helmlite.ReadValues(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", s.text, err)
		}
		values = helmlite.MergeValues(values, fileValues)
	}
	for _, s := range settings {
		var err error
		switch s.kind {
		case "set":
			err = helmlite.ParseSet(values, s.text, false)
		case "set-string":
			err = helmlite.ParseSet(values, s.text, true)
		case "set-file":
			err = setFile(values, s.text)
		}
		if err != nil {
			return nil, err
		}
	}
	return values, nil
}

func setFile(values map[string]interface{}, text string) error {
	eq := strings.IndexByte(text, '=')
	if eq <= 0 {
		return fmt.Errorf("--set-file needs KEY=PATH")
	}
	data, err := readFile(text[eq+1:])
	if err != nil {
		return err
	}
	return helmlite.SetKey(values, text[:eq], string(data))
}

func readFile(path string) ([]byte, error) { return readBounded(path, maxValuesFileBytes) }

func readBounded(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(data) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return data, nil
}
