package helmlite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

// A named template may include itself (directly or not) at most this many times at once;
// Helm has the same limit, so a runaway recursion is an error rather than a hang.
const maxIncludeDepth = 1000

// Release is .Release as `helm template` sets it for a first install.
type Release struct {
	Name      string
	Namespace string
	IsInstall bool
	IsUpgrade bool
	Revision  int
	Service   string
}

// KubeVersion is .Capabilities.KubeVersion.
type KubeVersion struct {
	Version    string
	Major      string
	Minor      string
	GitVersion string
}

// String lets `{{ .Capabilities.KubeVersion }}` print the version, as in Helm.
func (v KubeVersion) String() string { return v.Version }

// Capabilities is .Capabilities: the Kubernetes version and nothing about the API groups
// (the renderer talks to no cluster).
type Capabilities struct {
	KubeVersion KubeVersion
}

// renderer holds one template set and the functions bound to it.
type renderer struct {
	set          *template.Template
	includeDepth map[string]int
	tplCount     int
}

func newRenderer() *renderer {
	r := &renderer{includeDepth: map[string]int{}}
	r.set = template.New("gotpl").Option("missingkey=zero").Funcs(r.funcMap())
	return r
}

// funcMap is sprig's text functions without env and expandenv (templates must not read the
// renderer's environment; Helm removes them too), plus Helm's additions.
func (r *renderer) funcMap() template.FuncMap {
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["toJson"] = toJSON
	funcs["fromJson"] = fromJSON
	funcs["required"] = required
	funcs["include"] = r.include
	funcs["tpl"] = r.tpl
	// `helm template` has no cluster: lookup finds nothing, and an empty map says so.
	funcs["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	return funcs
}

func (r *renderer) include(name string, data interface{}) (string, error) {
	if r.includeDepth[name] >= maxIncludeDepth {
		return "", fmt.Errorf("rendering template has a nested reference name: %s", name)
	}
	r.includeDepth[name]++
	defer func() { r.includeDepth[name]-- }()
	var out strings.Builder
	err := r.set.ExecuteTemplate(&out, name, data)
	return out.String(), err
}

// tpl renders a string as a template, with the chart's named templates available to it.
func (r *renderer) tpl(text string, data interface{}) (string, error) {
	if r.includeDepth["tpl"] >= maxIncludeDepth {
		return "", errors.New("tpl nested too deeply")
	}
	r.includeDepth["tpl"]++
	defer func() { r.includeDepth["tpl"]-- }()
	clone, err := r.set.Clone()
	if err != nil {
		return "", err
	}
	r.tplCount++
	t, err := clone.New(fmt.Sprintf("tpl-%d", r.tplCount)).Parse(text)
	if err != nil {
		return "", fmt.Errorf("cannot parse template %q: %v", excerpt(text), err)
	}
	var out strings.Builder
	if err := t.Execute(&out, data); err != nil {
		return "", err
	}
	return strings.ReplaceAll(out.String(), "<no value>", ""), nil
}

func required(message string, value interface{}) (interface{}, error) {
	if value == nil {
		return nil, errors.New(message)
	}
	if s, ok := value.(string); ok && s == "" {
		return value, errors.New(message)
	}
	return value, nil
}

// toYAML is Helm's: sigs.k8s.io/yaml output without the final newline, "" on error.
func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

// fromYAML is Helm's: a map, or a map holding the parse error under "Error".
func fromYAML(text string) map[string]interface{} {
	out := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(text), &out); err != nil {
		out["Error"] = err.Error()
	}
	return out
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(text string) map[string]interface{} {
	out := map[string]interface{}{}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		out["Error"] = err.Error()
	}
	return out
}

func excerpt(text string) string {
	if len(text) > 60 {
		return text[:60] + "..."
	}
	return text
}

// renderTemplates parses every template into one set (so each sees the others' named
// templates) and executes each that is not a partial, plus NOTES.txt.
func renderTemplates(templates []Template, data map[string]interface{}) (map[string]string, error) {
	r := newRenderer()
	for _, t := range templates {
		if _, err := r.set.New(t.Name).Parse(t.Text); err != nil {
			return nil, cleanTemplateError(err)
		}
	}
	rendered := map[string]string{}
	for _, t := range templates {
		base := t.Name[strings.LastIndex(t.Name, "/")+1:]
		if strings.HasPrefix(base, "_") {
			continue
		}
		scope := map[string]interface{}{}
		for k, v := range data {
			scope[k] = v
		}
		scope["Template"] = map[string]interface{}{
			"Name":     t.Name,
			"BasePath": t.Name[:strings.LastIndex(t.Name, "/")],
		}
		var out bytes.Buffer
		if err := r.set.ExecuteTemplate(&out, t.Name, scope); err != nil {
			return nil, cleanTemplateError(err)
		}
		rendered[t.Name] = strings.ReplaceAll(out.String(), "<no value>", "")
	}
	return rendered, nil
}

var (
	// `template: NAME:LINE:COL: executing "NAME" at <...>: error calling FUNC: MESSAGE`
	execLocation = regexp.MustCompile(`template: ([^:\s]+:\d+:\d+): executing `)
	calledFunc   = regexp.MustCompile(`error calling (?:fail|required): `)
)

// cleanTemplateError turns Go's nested execution error for `fail` and `required` into
// Helm's `execution error at (FILE:LINE:COL): MESSAGE`, naming the innermost template;
// other errors pass through unchanged.
func cleanTemplateError(err error) error {
	text := err.Error()
	call := calledFunc.FindAllStringIndex(text, -1)
	if call == nil {
		return err
	}
	last := call[len(call)-1]
	message := text[last[1]:]
	locations := execLocation.FindAllStringSubmatchIndex(text[:last[0]], -1)
	if locations == nil {
		return errors.New(message)
	}
	where := locations[len(locations)-1]
	return fmt.Errorf("execution error at (%s): %s", text[where[2]:where[3]], message)
}
