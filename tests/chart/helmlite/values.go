package helmlite

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Limits on a --set expression, as Helm has them (a list index above 65536 is refused) or
// tighter (length, depth): the expression comes from a command line or a test table.
const (
	maxSetLength = 64 << 10
	maxSetDepth  = 64
	maxSetIndex  = 65536
)

// ReadValues parses a values file the way Helm does: YAML converted to JSON first, so every
// number becomes a float64. An empty file is an empty map; anything but a map is an error.
func ReadValues(data []byte) (map[string]interface{}, error) {
	var parsed interface{}
	if err := yaml.Unmarshal(data, &parsed); err != nil {
		return nil, err
	}
	if parsed == nil {
		return map[string]interface{}{}, nil
	}
	values, ok := parsed.(map[string]interface{})
	if !ok {
		return nil, errors.New("the top level must be a map of values")
	}
	return values, nil
}

// MergeValues returns base with override laid over it, as Helm coalesces user values over a
// chart's defaults: maps merge key by key, anything else (lists included) is replaced, and a
// null in override deletes the key. Neither argument is modified.
func MergeValues(base, override map[string]interface{}) map[string]interface{} {
	merged := deepCopyMap(base)
	for key, value := range override {
		if value == nil {
			delete(merged, key)
			continue
		}
		overrideMap, overrideIsMap := value.(map[string]interface{})
		baseMap, baseIsMap := merged[key].(map[string]interface{})
		if overrideIsMap && baseIsMap {
			merged[key] = MergeValues(baseMap, overrideMap)
		} else {
			merged[key] = deepCopy(value)
		}
	}
	return merged
}

func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		return deepCopyMap(t)
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, item := range t {
			out[i] = deepCopy(item)
		}
		return out
	default:
		return v
	}
}

func deepCopyMap(m map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = deepCopy(v)
	}
	return out
}

// ParseSet applies one --set (or, with asString, --set-string) expression to values:
// `a.b=c`, several separated by commas, `a\.b=c` for a key holding a dot, `a[0]=c` for list
// elements and `a={x,y}` for a list. Values are typed as Helm types them: true, false and
// null (any case), integers without a leading zero, strings otherwise. Errors name the
// position and never repeat a value (a value may be a token).
func ParseSet(values map[string]interface{}, expr string, asString bool) error {
	if len(expr) > maxSetLength {
		return fmt.Errorf("--set expression longer than %d bytes", maxSetLength)
	}
	if strings.IndexByte(expr, 0) >= 0 {
		return errors.New("--set expression holds a NUL byte")
	}
	p := setParser{input: []rune(expr), asString: asString}
	for {
		if err := p.assignment(values); err != nil {
			return err
		}
		if p.done() {
			return nil
		}
		p.pos++ // the comma between assignments
		if p.done() {
			return fmt.Errorf("--set: nothing after the comma at position %d", p.pos)
		}
	}
}

type setParser struct {
	input    []rune
	pos      int
	asString bool
}

// keySegment is one step of a key path: a map key, then list indexes.
type keySegment struct {
	name    string
	indexes []int
}

func (p *setParser) done() bool { return p.pos >= len(p.input) }

func (p *setParser) assignment(values map[string]interface{}) error {
	start := p.pos
	path, err := p.keyPath()
	if err != nil {
		return err
	}
	if p.done() || p.input[p.pos] != '=' {
		return fmt.Errorf("--set: key %q at position %d has no '=VALUE'", keyText(path), start)
	}
	p.pos++
	var value interface{}
	if !p.done() && p.input[p.pos] == '{' {
		if value, err = p.list(); err != nil {
			return err
		}
	} else {
		value = p.scalar(p.until(','))
	}
	return setPath(values, path, value)
}

// keyPath reads `seg(.seg)*` up to the '='.
func (p *setParser) keyPath() ([]keySegment, error) {
	var path []keySegment
	for {
		if len(path) == maxSetDepth {
			return nil, fmt.Errorf("--set: key nested deeper than %d levels", maxSetDepth)
		}
		start := p.pos
		var name strings.Builder
		for !p.done() {
			c := p.input[p.pos]
			if c == '\\' {
				if p.pos+1 == len(p.input) {
					return nil, fmt.Errorf("--set: a key ends in a lone backslash at position %d", p.pos)
				}
				name.WriteRune(p.input[p.pos+1])
				p.pos += 2
				continue
			}
			if c == '.' || c == '=' || c == ',' || c == '[' || c == '{' || c == '}' || c == ']' {
				break
			}
			name.WriteRune(c)
			p.pos++
		}
		if name.Len() == 0 {
			return nil, fmt.Errorf("--set: empty key name at position %d", start)
		}
		segment := keySegment{name: name.String()}
		for !p.done() && p.input[p.pos] == '[' {
			index, err := p.index()
			if err != nil {
				return nil, err
			}
			segment.indexes = append(segment.indexes, index)
		}
		path = append(path, segment)
		if p.done() || p.input[p.pos] != '.' {
			return path, nil
		}
		p.pos++
	}
}

func (p *setParser) index() (int, error) {
	start := p.pos
	p.pos++ // '['
	digits := p.until(']')
	if p.done() {
		return 0, fmt.Errorf("--set: unclosed '[' at position %d", start)
	}
	p.pos++ // ']'
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || (len(digits) > 1 && digits[0] == '0') {
		return 0, fmt.Errorf("--set: list index at position %d is not a non-negative integer", start)
	}
	if n > maxSetIndex {
		return 0, fmt.Errorf("--set: list index at position %d is above the limit of %d", start, maxSetIndex)
	}
	return n, nil
}

// until reads up to (not including) an unescaped stop rune or the end, unescaping.
func (p *setParser) until(stop rune) string {
	var out strings.Builder
	for !p.done() {
		c := p.input[p.pos]
		if c == '\\' && p.pos+1 < len(p.input) {
			out.WriteRune(p.input[p.pos+1])
			p.pos += 2
			continue
		}
		if c == stop {
			break
		}
		out.WriteRune(c)
		p.pos++
	}
	return out.String()
}

// list reads `{a,b,c}`: a flat list of scalars.
func (p *setParser) list() ([]interface{}, error) {
	start := p.pos
	p.pos++ // '{'
	items := []interface{}{}
	for {
		var item strings.Builder
		for !p.done() {
			c := p.input[p.pos]
			if c == '\\' && p.pos+1 < len(p.input) {
				item.WriteRune(p.input[p.pos+1])
				p.pos += 2
				continue
			}
			if c == ',' || c == '}' {
				break
			}
			if c == '{' {
				return nil, fmt.Errorf("--set: nested '{' at position %d: lists hold only scalars", p.pos)
			}
			item.WriteRune(c)
			p.pos++
		}
		if p.done() {
			return nil, fmt.Errorf("--set: unclosed '{' at position %d", start)
		}
		closing := p.input[p.pos] == '}'
		p.pos++
		if !(closing && item.Len() == 0 && len(items) == 0) {
			items = append(items, p.scalar(item.String()))
		}
		if closing {
			if !p.done() && p.input[p.pos] != ',' {
				return nil, fmt.Errorf("--set: unexpected text after '}' at position %d", p.pos)
			}
			return items, nil
		}
	}
}

func (p *setParser) scalar(text string) interface{} {
	if p.asString {
		return text
	}
	switch strings.ToLower(text) {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	case "0":
		return int64(0)
	}
	if text != "" && text[0] != '0' {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return n
		}
	}
	return text
}

// setPath stores value at path, creating maps and growing lists on the way.
func setPath(values map[string]interface{}, path []keySegment, value interface{}) error {
	current := values
	for i, segment := range path {
		last := i == len(path)-1
		if len(segment.indexes) == 0 {
			if last {
				current[segment.name] = value
				return nil
			}
			next, ok := current[segment.name].(map[string]interface{})
			if !ok {
				next = map[string]interface{}{}
				current[segment.name] = next
			}
			current = next
			continue
		}
		list, _ := current[segment.name].([]interface{})
		list, holder, err := descendList(list, segment.indexes, last, value)
		if err != nil {
			return fmt.Errorf("--set: key %q: %v", keyText(path[:i+1]), err)
		}
		current[segment.name] = list
		if last {
			return nil
		}
		current = holder
	}
	return nil
}

// descendList walks (and grows) nested lists along indexes. When last, it stores value at
// the final index; otherwise it returns the map found (or created) there.
func descendList(list []interface{}, indexes []int, last bool, value interface{}) ([]interface{}, map[string]interface{}, error) {
	index := indexes[0]
	for len(list) <= index {
		list = append(list, nil)
	}
	if len(indexes) > 1 {
		inner, _ := list[index].([]interface{})
		inner, holder, err := descendList(inner, indexes[1:], last, value)
		if err != nil {
			return nil, nil, err
		}
		list[index] = inner
		return list, holder, nil
	}
	if last {
		list[index] = value
		return list, nil, nil
	}
	holder, ok := list[index].(map[string]interface{})
	if !ok {
		holder = map[string]interface{}{}
		list[index] = holder
	}
	return list, holder, nil
}

func keyText(path []keySegment) string {
	var parts []string
	for _, segment := range path {
		part := strings.ReplaceAll(segment.name, ".", `\.`)
		for _, index := range segment.indexes {
			part += "[" + strconv.Itoa(index) + "]"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ".")
}

// SetKey stores value at a key written as --set writes keys (`a.b`, `a\.b`, `a[0]`): what
// --set-file needs, whose value is a file's text rather than --set syntax.
func SetKey(values map[string]interface{}, key string, value interface{}) error {
	if len(key) > maxSetLength || strings.IndexByte(key, 0) >= 0 {
		return errors.New("--set-file: key too long or holding a NUL byte")
	}
	p := setParser{input: []rune(key)}
	path, err := p.keyPath()
	if err != nil {
		return err
	}
	if !p.done() {
		return fmt.Errorf("--set-file: unexpected %q at position %d of the key", string(p.input[p.pos]), p.pos)
	}
	return setPath(values, path, value)
}
