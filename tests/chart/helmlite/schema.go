package helmlite

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/xeipuuv/gojsonschema"
)

// ValidateValues checks the merged values against a chart's values.schema.json, as Helm 3
// does before rendering (with the same library and the same message layout).
func ValidateValues(chartName string, schema []byte, values map[string]interface{}) error {
	if schema == nil {
		return nil
	}
	valuesJSON, err := json.Marshal(values)
	if err != nil {
		return fmt.Errorf("values cannot be converted to JSON: %v", err)
	}
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema),
		gojsonschema.NewBytesLoader(valuesJSON))
	if err != nil {
		return fmt.Errorf("%s: values.schema.json: %v", chartName, err)
	}
	if result.Valid() {
		return nil
	}
	var message strings.Builder
	message.WriteString("values don't meet the specifications of the schema(s) in the following chart(s):\n")
	message.WriteString(chartName + ":\n")
	for _, problem := range result.Errors() {
		message.WriteString("- " + problem.String() + "\n")
	}
	return fmt.Errorf("%s", strings.TrimSuffix(message.String(), "\n"))
}
