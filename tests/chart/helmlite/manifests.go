package helmlite

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Manifest is one Kubernetes object of the rendered chart: the text as rendered, and the
// object parsed from it.
type Manifest struct {
	Source  string // CHART/templates/FILE
	Content string
	Object  map[string]interface{}
}

// Kind returns the object's kind ("" when absent).
func (m Manifest) Kind() string { s, _ := m.Object["kind"].(string); return s }

// Name returns metadata.name ("" when absent).
func (m Manifest) Name() string {
	meta, _ := m.Object["metadata"].(map[string]interface{})
	s, _ := meta["name"].(string)
	return s
}

// installOrder is the order in which Helm creates kinds (and prints them in `helm template`):
// what others refer to comes first. Kinds not listed come after, by name.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService",
}

var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// splitManifests cuts each rendered file into YAML documents and parses each; empty
// documents (whitespace or comments only) are dropped, as Helm drops them.
func splitManifests(rendered map[string]string) ([]Manifest, error) {
	var sources []string
	for source := range rendered {
		sources = append(sources, source)
	}
	sort.Strings(sources)
	var manifests []Manifest
	for _, source := range sources {
		for _, doc := range documentSeparator.Split(rendered[source], -1) {
			content := strings.TrimSpace(doc)
			if content == "" {
				continue
			}
			var object map[string]interface{}
			if err := yaml.Unmarshal([]byte(content), &object); err != nil {
				return nil, fmt.Errorf("YAML parse error on %s: %v", source, err)
			}
			if object == nil {
				continue
			}
			m := Manifest{Source: source, Content: content, Object: object}
			if err := checkHead(m); err != nil {
				return nil, fmt.Errorf("%s: %v", source, err)
			}
			manifests = append(manifests, m)
		}
	}
	sortByInstallOrder(manifests)
	return manifests, nil
}

func checkHead(m Manifest) error {
	if apiVersion, _ := m.Object["apiVersion"].(string); apiVersion == "" {
		return errors.New("object has no apiVersion")
	}
	if m.Kind() == "" {
		return errors.New("object has no kind")
	}
	if m.Name() == "" {
		return fmt.Errorf("%s has no metadata.name", m.Kind())
	}
	return nil
}

func sortByInstallOrder(manifests []Manifest) {
	rank := map[string]int{}
	for i, kind := range installOrder {
		rank[kind] = i
	}
	position := func(m Manifest) int {
		if r, ok := rank[m.Kind()]; ok {
			return r
		}
		return len(installOrder)
	}
	sort.SliceStable(manifests, func(i, j int) bool {
		a, b := manifests[i], manifests[j]
		if position(a) != position(b) {
			return position(a) < position(b)
		}
		if a.Kind() != b.Kind() {
			return a.Kind() < b.Kind()
		}
		return a.Name() < b.Name()
	})
}

// FormatYAML prints manifests as `helm template` does: each document headed by `---` and
// the template it came from.
func FormatYAML(manifests []Manifest) string {
	var out strings.Builder
	for _, m := range manifests {
		out.WriteString("---\n# Source: " + m.Source + "\n" + m.Content + "\n")
	}
	return out.String()
}
