// Package helmlite renders a Helm chart the way `helm template` does, with Go's text/template
// and the sprig function library, plus the few functions and objects Helm adds on top. It
// exists because no Helm binary is installable here; it implements what the uplink chart
// uses and refuses what it does not implement rather than rendering something different.
package helmlite

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

// Bounds on what a chart may hold: a chart is trusted input, but a renderer that reads a
// directory given on its command line still reads nothing without a bound.
const (
	maxChartFileBytes = 1 << 20
	maxTemplateFiles  = 256
)

// Metadata is the part of Chart.yaml templates see as .Chart (Helm's field names).
type Metadata struct {
	APIVersion  string   `json:"apiVersion"`
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	AppVersion  string   `json:"appVersion,omitempty"`
	KubeVersion string   `json:"kubeVersion,omitempty"`
	Description string   `json:"description,omitempty"`
	Type        string   `json:"type,omitempty"`
	Home        string   `json:"home,omitempty"`
	Sources     []string `json:"sources,omitempty"`
	Keywords    []string `json:"keywords,omitempty"`
}

// Template is one file under templates/, named as Helm names it: CHART/templates/FILE.
type Template struct {
	Name string
	Text string
}

// Chart is a chart directory loaded into memory.
type Chart struct {
	Dir       string
	Metadata  Metadata
	Values    map[string]interface{}
	Schema    []byte // values.schema.json; nil when the chart has none
	Templates []Template
}

// LoadChart reads Chart.yaml, values.yaml, values.schema.json and templates/ from dir.
// Dependencies (charts/, requirements) are not supported: a chart that declares them is
// refused instead of rendered without them.
func LoadChart(dir string) (*Chart, error) {
	files := map[string][]byte{}
	for _, name := range []string{"Chart.yaml", "values.yaml", "values.schema.json"} {
		data, err := readBounded(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) && name != "Chart.yaml" {
			continue
		}
		if err != nil {
			return nil, err
		}
		files[name] = data
	}
	templatesDir := filepath.Join(dir, "templates")
	templates := 0
	err := filepath.WalkDir(templatesDir, func(p string, entry os.DirEntry, walkErr error) error {
		if walkErr != nil {
			return walkErr
		}
		if entry.IsDir() {
			return nil
		}
		if !entry.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		if templates++; templates > maxTemplateFiles {
			return fmt.Errorf("%s: more than %d template files", templatesDir, maxTemplateFiles)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		text, err := readBounded(p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = text
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return loadFiles(dir, files)
}

// loadFiles makes a chart of its files, named by their slash-separated paths inside the
// chart ("Chart.yaml", "templates/x.yaml"); other files (README.md) are ignored, as Helm
// ignores them when rendering.
func loadFiles(dir string, files map[string][]byte) (*Chart, error) {
	chartYAML, ok := files["Chart.yaml"]
	if !ok {
		return nil, errors.New("the chart has no Chart.yaml")
	}
	var meta Metadata
	if err := yaml.Unmarshal(chartYAML, &meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %v", err)
	}
	if err := checkMetadata(meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %v", err)
	}
	var withDeps struct {
		Dependencies []interface{} `json:"dependencies"`
	}
	if err := yaml.Unmarshal(chartYAML, &withDeps); err == nil && len(withDeps.Dependencies) > 0 {
		return nil, errors.New("Chart.yaml: chart dependencies are not supported by this renderer")
	}

	chart := &Chart{Dir: dir, Metadata: meta, Values: map[string]interface{}{}}
	if data, ok := files["values.yaml"]; ok {
		var err error
		if chart.Values, err = ReadValues(data); err != nil {
			return nil, fmt.Errorf("values.yaml: %v", err)
		}
	}
	chart.Schema = files["values.schema.json"]
	for name, text := range files {
		if strings.HasPrefix(name, "templates/") {
			chart.Templates = append(chart.Templates, Template{Name: path.Join(meta.Name, name), Text: string(text)})
		}
	}
	sort.Slice(chart.Templates, func(i, j int) bool {
		return chart.Templates[i].Name < chart.Templates[j].Name
	})
	return chart, nil
}

func checkMetadata(meta Metadata) error {
	if meta.APIVersion != "v2" {
		return fmt.Errorf("apiVersion must be v2, not %q", meta.APIVersion)
	}
	if meta.Name == "" {
		return errors.New("name is required")
	}
	if _, err := semver.StrictNewVersion(meta.Version); err != nil {
		return fmt.Errorf("version %q is not semantic version 2: %v", meta.Version, err)
	}
	if meta.KubeVersion != "" {
		if _, err := semver.NewConstraint(meta.KubeVersion); err != nil {
			return fmt.Errorf("kubeVersion %q: %v", meta.KubeVersion, err)
		}
	}
	if meta.Type != "" && meta.Type != "application" {
		return fmt.Errorf("type %q: only application charts render", meta.Type)
	}
	return nil
}

// readBounded reads a whole file of at most maxChartFileBytes.
func readBounded(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxChartFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	if len(data) > maxChartFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, maxChartFileBytes)
	}
	return data, nil
}
