package helmlite

import (
	"fmt"
	"path"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// DefaultKubeVersion is the Kubernetes version templates see unless told otherwise.
const DefaultKubeVersion = "v1.30.0"

// Options are what `helm template` takes from its command line.
type Options struct {
	ReleaseName string
	Namespace   string
	KubeVersion string                 // e.g. v1.30.0; DefaultKubeVersion when empty
	Values      map[string]interface{} // user values (-f files and --set), laid over the chart's
}

// Result is a rendered chart.
type Result struct {
	Values    map[string]interface{} // the merged values the templates saw
	Manifests []Manifest             // in Helm's install order
	Notes     string                 // NOTES.txt, rendered
}

// Render merges values, validates them against the chart's schema, checks the chart's
// kubeVersion, renders every template and parses the objects.
func Render(chart *Chart, opts Options) (*Result, error) {
	if opts.ReleaseName == "" || len(opts.ReleaseName) > 53 || !isDNSLabel(opts.ReleaseName) {
		return nil, fmt.Errorf("release name %q: must be a DNS-1123 label of at most 53 characters", opts.ReleaseName)
	}
	if opts.Namespace == "" || !isDNSLabel(opts.Namespace) {
		return nil, fmt.Errorf("namespace %q: must be a DNS-1123 label", opts.Namespace)
	}
	kubeVersion, err := parseKubeVersion(opts.KubeVersion)
	if err != nil {
		return nil, err
	}
	if chart.Metadata.KubeVersion != "" {
		constraint, err := semver.NewConstraint(chart.Metadata.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("Chart.yaml kubeVersion: %v", err)
		}
		v, _ := semver.NewVersion(kubeVersion.Version)
		if !constraint.Check(v) {
			return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s",
				chart.Metadata.KubeVersion, kubeVersion.Version)
		}
	}

	values := MergeValues(chart.Values, opts.Values)
	if err := ValidateValues(chart.Metadata.Name, chart.Schema, values); err != nil {
		return nil, err
	}
	data := map[string]interface{}{
		"Values": values,
		"Chart":  chart.Metadata,
		"Release": Release{
			Name: opts.ReleaseName, Namespace: opts.Namespace,
			IsInstall: true, Revision: 1, Service: "Helm",
		},
		"Capabilities": Capabilities{KubeVersion: kubeVersion},
	}
	rendered, err := renderTemplates(chart.Templates, data)
	if err != nil {
		return nil, err
	}
	result := &Result{Values: values}
	manifestFiles := map[string]string{}
	for name, text := range rendered {
		if path.Base(name) == "NOTES.txt" {
			if name == path.Join(chart.Metadata.Name, "templates", "NOTES.txt") {
				result.Notes = text
			}
			continue
		}
		manifestFiles[name] = text
	}
	if result.Manifests, err = splitManifests(manifestFiles); err != nil {
		return nil, err
	}
	return result, nil
}

func parseKubeVersion(text string) (KubeVersion, error) {
	if text == "" {
		text = DefaultKubeVersion
	}
	v, err := semver.NewVersion(text)
	if err != nil {
		return KubeVersion{}, fmt.Errorf("--kube-version %q: %v", text, err)
	}
	version := fmt.Sprintf("v%d.%d.%d", v.Major(), v.Minor(), v.Patch())
	return KubeVersion{
		Version:    version,
		Major:      fmt.Sprint(v.Major()),
		Minor:      fmt.Sprint(v.Minor()),
		GitVersion: version,
	}, nil
}

func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, c := range s {
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !alnum && !(c == '-' && i > 0 && i < len(s)-1) {
			return false
		}
	}
	return !strings.HasPrefix(s, "-")
}
