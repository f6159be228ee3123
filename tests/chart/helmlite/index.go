package helmlite

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path"
	"time"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/yaml"
)

// IndexFile is a chart repository's index.yaml with exactly the fields Helm 3's repo.IndexFile
// knows: Helm reads an index with a strict YAML parser, so any other field makes `helm repo
// add` fail.
type IndexFile struct {
	ServerInfo  map[string]interface{}     `json:"serverInfo,omitempty"`
	APIVersion  string                     `json:"apiVersion"`
	Generated   time.Time                  `json:"generated"`
	Entries     map[string][]*ChartVersion `json:"entries"`
	PublicKeys  []string                   `json:"publicKeys,omitempty"`
	Annotations map[string]string          `json:"annotations,omitempty"`
}

// ChartVersion is one entry: Helm's chart.Metadata fields, then the repository's.
type ChartVersion struct {
	Name         string                   `json:"name,omitempty"`
	Home         string                   `json:"home,omitempty"`
	Sources      []string                 `json:"sources,omitempty"`
	Version      string                   `json:"version,omitempty"`
	Description  string                   `json:"description,omitempty"`
	Keywords     []string                 `json:"keywords,omitempty"`
	Maintainers  []map[string]string      `json:"maintainers,omitempty"`
	Icon         string                   `json:"icon,omitempty"`
	APIVersion   string                   `json:"apiVersion,omitempty"`
	Condition    string                   `json:"condition,omitempty"`
	Tags         string                   `json:"tags,omitempty"`
	AppVersion   string                   `json:"appVersion,omitempty"`
	Deprecated   bool                     `json:"deprecated,omitempty"`
	Annotations  map[string]string        `json:"annotations,omitempty"`
	KubeVersion  string                   `json:"kubeVersion,omitempty"`
	Dependencies []map[string]interface{} `json:"dependencies,omitempty"`
	Type         string                   `json:"type,omitempty"`

	URLs    []string  `json:"urls"`
	Created time.Time `json:"created,omitempty"`
	Removed bool      `json:"removed,omitempty"`
	Digest  string    `json:"digest,omitempty"`
}

// LoadIndex parses index.yaml as Helm does (strictly) and checks what Helm's loader and
// `helm pull` rely on: the apiVersion, and for every entry a name, a SemVer version, an
// apiVersion, a chart type Helm knows, and at least one URL.
func LoadIndex(data []byte) (*IndexFile, error) {
	if len(data) == 0 {
		return nil, errors.New("index.yaml is empty")
	}
	var index IndexFile
	if err := yaml.UnmarshalStrict(data, &index); err != nil {
		return nil, fmt.Errorf("index.yaml: %v", err)
	}
	if index.APIVersion == "" {
		return nil, errors.New("index.yaml: no API version specified")
	}
	for name, versions := range index.Entries {
		for _, v := range versions {
			if v == nil {
				return nil, fmt.Errorf("index.yaml: %s has an empty entry", name)
			}
			if v.Name != name {
				return nil, fmt.Errorf("index.yaml: entry %s holds chart %q", name, v.Name)
			}
			if _, err := semver.StrictNewVersion(v.Version); err != nil {
				return nil, fmt.Errorf("index.yaml: %s version %q: %v", name, v.Version, err)
			}
			if v.APIVersion == "" {
				return nil, fmt.Errorf("index.yaml: %s %s has no apiVersion", name, v.Version)
			}
			if v.Type != "" && v.Type != "application" && v.Type != "library" {
				return nil, fmt.Errorf("index.yaml: %s %s has type %q", name, v.Version, v.Type)
			}
			if len(v.URLs) == 0 {
				return nil, fmt.Errorf("index.yaml: %s %s lists no URL", name, v.Version)
			}
		}
	}
	return &index, nil
}

// CheckListed verifies that the index lists `chart`, packaged as `archive` and fetched from
// the repository under the name `fileName`, as `helm pull` would find it: an entry of the
// same name and version whose first URL, resolved against `repositoryURL` as Helm resolves
// it, ends in `fileName`, whose digest is the archive's SHA-256, and whose metadata is the
// chart's own.
func (index *IndexFile) CheckListed(repositoryURL string, chart *Chart, archive []byte, fileName string) error {
	var entry *ChartVersion
	for _, v := range index.Entries[chart.Metadata.Name] {
		if v.Version == chart.Metadata.Version {
			entry = v
		}
	}
	if entry == nil {
		return fmt.Errorf("index.yaml does not list %s %s", chart.Metadata.Name, chart.Metadata.Version)
	}
	sum := sha256.Sum256(archive)
	if entry.Digest != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("index.yaml digest %s is not the archive's SHA-256 %x", entry.Digest, sum)
	}
	base, err := url.Parse(repositoryURL + "/")
	if err != nil {
		return fmt.Errorf("repository URL %q: %v", repositoryURL, err)
	}
	ref, err := url.Parse(entry.URLs[0])
	if err != nil {
		return fmt.Errorf("index.yaml URL %q: %v", entry.URLs[0], err)
	}
	if resolved := base.ResolveReference(ref); path.Base(resolved.Path) != fileName {
		return fmt.Errorf("index.yaml URL %q resolves to %s, not the archive %s", entry.URLs[0], resolved, fileName)
	}
	meta := chart.Metadata
	for _, pair := range [][3]string{
		{"apiVersion", entry.APIVersion, meta.APIVersion},
		{"appVersion", entry.AppVersion, meta.AppVersion},
		{"kubeVersion", entry.KubeVersion, meta.KubeVersion},
		{"description", entry.Description, meta.Description},
		{"type", entry.Type, meta.Type},
	} {
		if pair[1] != pair[2] {
			return fmt.Errorf("index.yaml %s %q differs from Chart.yaml's %q", pair[0], pair[1], pair[2])
		}
	}
	return nil
}
