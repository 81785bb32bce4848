package report

import _ "embed"

// JSONSchema is the JSON Schema (draft 2020-12) of the rdmadoctor.report/v1
// document, published as report/rdmadoctor.report.v1.schema.json.
//
//go:embed rdmadoctor.report.v1.schema.json
var JSONSchema []byte
