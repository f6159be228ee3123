package helmlite

import (
	"encoding/json"
	"strings"
	"testing"
)

func mustJSON(t *testing.T, v interface{}) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestParseSetTypesAndPaths(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"a=b", `{"a":"b"}`},
		{"a.b.c=1", `{"a":{"b":{"c":1}}}`},
		{"a=true,b=FALSE,c=null", `{"a":true,"b":false,"c":null}`},
		{"a=0,b=007,c=-3,d=1e3,e=99999999999999999999", `{"a":0,"b":"007","c":-3,"d":"1e3","e":"99999999999999999999"}`},
		{`nodeSelector.nvidia\.com/gpu\.present=true`, `{"nodeSelector":{"nvidia.com/gpu.present":true}}`},
		{"list={a,b,3}", `{"list":["a","b",3]}`},
		{"list={}", `{"list":[]}`},
		{"list[1]=x", `{"list":[null,"x"]}`},
		{"list[0].name=x,list[0].port=80", `{"list":[{"name":"x","port":80}]}`},
		{"m[0][1]=x", `{"m":[[null,"x"]]}`},
		{`a=x\,y`, `{"a":"x,y"}`},
		{"a=", `{"a":""}`},
		{"a=b=c", `{"a":"b=c"}`},
	}
	for _, c := range cases {
		values := map[string]interface{}{}
		if err := ParseSet(values, c.expr, false); err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		if got := mustJSON(t, values); got != c.want {
			t.Errorf("%q: got %s, want %s", c.expr, got, c.want)
		}
	}
}

func TestParseSetStringKeepsText(t *testing.T) {
	values := map[string]interface{}{}
	if err := ParseSet(values, "a=true,b=10,c=null", true); err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, values); got != `{"a":"true","b":"10","c":"null"}` {
		t.Errorf("got %s", got)
	}
}

// Hostile --set input: a clear error, never a panic or an unbounded allocation, and never
// the value itself in the message.
func TestParseSetRefusesMalformedInput(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"", "empty key name"},
		{"=x", "empty key name"},
		{"a", `key "a" at position 0 has no '=VALUE'`},
		{"a.=x", "empty key name at position 2"},
		{"a..b=x", "empty key name"},
		{"a=1,", "nothing after the comma"},
		{"a[=x", "unclosed '['"},
		{"a[-1]=x", "not a non-negative integer"},
		{"a[01]=x", "not a non-negative integer"},
		{"a[x]=x", "not a non-negative integer"},
		{"a[65537]=x", "above the limit of 65536"},
		{"a[99999999999999999999]=x", "not a non-negative integer"},
		{"a={x,y", "unclosed '{'"},
		{"a={x,{y}}", "nested '{'"},
		{"a={x}y", "unexpected text after '}'"},
		{`a\`, "lone backslash"},
		{"a=x\x00y", "NUL byte"},
		{strings.Repeat("a.", 100) + "b=1", "deeper than 64 levels"},
		{"a=" + strings.Repeat("x", maxSetLength), "longer than"},
	}
	for _, c := range cases {
		err := ParseSet(map[string]interface{}{}, c.expr, false)
		if err == nil {
			t.Errorf("%.40q: accepted", c.expr)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40q: error %q lacks %q", c.expr, err, c.want)
		}
	}
	err := ParseSet(map[string]interface{}{}, "token.value[x]=agt_secret", false)
	if err == nil || strings.Contains(err.Error(), "agt_secret") {
		t.Errorf("the error repeats the value: %v", err)
	}
}

func TestSetKey(t *testing.T) {
	values := map[string]interface{}{"config": map[string]interface{}{"logLevel": "info"}}
	if err := SetKey(values, "config.caBundle", "-----BEGIN CERTIFICATE-----\n,{}=\n"); err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, values); got != `{"config":{"caBundle":"-----BEGIN CERTIFICATE-----\n,{}=\n","logLevel":"info"}}` {
		t.Errorf("got %s", got)
	}
	for _, bad := range []string{"", "a=b", "a.", "a\x00"} {
		if err := SetKey(values, bad, "x"); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
}

func TestMergeValuesCoalescesLikeHelm(t *testing.T) {
	base := map[string]interface{}{
		"a":    map[string]interface{}{"x": 1.0, "y": 2.0},
		"list": []interface{}{"p", "q"},
		"keep": "k",
		"drop": "d",
	}
	override := map[string]interface{}{
		"a":    map[string]interface{}{"y": 3.0, "z": 4.0},
		"list": []interface{}{"r"},
		"drop": nil,
	}
	merged := MergeValues(base, override)
	if got := mustJSON(t, merged); got != `{"a":{"x":1,"y":3,"z":4},"keep":"k","list":["r"]}` {
		t.Errorf("merged %s", got)
	}
	// Neither input changed: a chart's defaults serve many renders.
	if got := mustJSON(t, base); got != `{"a":{"x":1,"y":2},"drop":"d","keep":"k","list":["p","q"]}` {
		t.Errorf("base modified: %s", got)
	}
	merged["a"].(map[string]interface{})["x"] = 99.0
	if base["a"].(map[string]interface{})["x"] != 1.0 {
		t.Error("the merge shares maps with its input")
	}
}

func TestReadValues(t *testing.T) {
	values, err := ReadValues([]byte("a: 1\nb: [x]\n"))
	if err != nil || mustJSON(t, values) != `{"a":1,"b":["x"]}` {
		t.Errorf("got %v %v", values, err)
	}
	if _, isFloat := values["a"].(float64); !isFloat {
		t.Errorf("numbers are %T, not float64 as in Helm", values["a"])
	}
	if values, err := ReadValues(nil); err != nil || len(values) != 0 {
		t.Errorf("empty file: %v %v", values, err)
	}
	for _, bad := range []string{"- a\n- b\n", "a: [\n", "\"just a string\"", "a: *undefined\n"} {
		if _, err := ReadValues([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// A billion-laughs document is refused by the YAML library, not expanded.
	laughs := "a: &a [x,x,x,x,x,x,x,x,x]\n"
	for i := 0; i < 9; i++ {
		laughs += string(rune('b'+i)) + ": &" + string(rune('b'+i)) + " [*" + string(rune('a'+i)) +
			",*" + string(rune('a'+i)) + ",*" + string(rune('a'+i)) + ",*" + string(rune('a'+i)) +
			",*" + string(rune('a'+i)) + ",*" + string(rune('a'+i)) + ",*" + string(rune('a'+i)) +
			",*" + string(rune('a'+i)) + ",*" + string(rune('a'+i)) + "]\n"
	}
	if _, err := ReadValues([]byte(laughs)); err == nil {
		t.Error("an alias bomb was expanded")
	}
}
