// Package fdbschema checks a `status json` document against FoundationDB's own status schema
// (JSONSchemas::statusSchema in fdbclient/Schemas.cpp, the document that
// documentation/sphinx/source/mr-status-json-schemas.rst.inc shows), with the rules of
// FoundationDB's schemaMatch (fdbclient/ManagementAPI.actor.cpp at 7.3.63; moved to
// fdbclient/StatusSchema.cpp later, same rules). FoundationDB runs the same check on every
// status document in its simulation tests (fdbcli/Util.cpp), so a document our simulator writes
// that fails it is one FoundationDB would not write.
package fdbschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
)

// Match reports every place where doc is not permitted by schema, as schemaMatch does: a key
// the schema does not know, a value of another JSON type (integers and reals are one type), a
// value outside a "$enum", an entry of a "$map" that is not an object or does not match, an
// item of an array that does not match the schema array's only item, or a non-empty array
// where the schema array is empty. Keys the schema has and doc lacks are fine: schemaMatch
// checks only that everything in the document is permitted.
func Match(schema, doc []byte) ([]string, error) {
	var s, d any
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("document: %w", err)
	}
	var errs []string
	match(s, d, "", &errs)
	return errs, nil
}

// jsonType is json_spirit's value type with int_type folded into real_type (normJSONType).
func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "bool"
	case float64:
		return "number"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func match(schema, value any, path string, errs *[]string) {
	if jsonType(schema) != jsonType(value) {
		*errs = append(*errs, fmt.Sprintf("Incorrect value type for key `%s' (schema %s, value %s)", path, jsonType(schema), jsonType(value)))
		return
	}
	switch v := value.(type) {
	case map[string]any:
		s := schema.(map[string]any)
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, key := range keys {
			rv, kpath := v[key], path+"."+key
			sv, ok := s[key]
			if !ok {
				*errs = append(*errs, fmt.Sprintf("Unknown key `%s'", kpath))
				continue
			}
			so, isObj := sv.(map[string]any)
			if enum, ok := so["$enum"]; isObj && ok {
				found := false
				for _, item := range enum.([]any) {
					if reflect.DeepEqual(item, rv) {
						found = true
						break
					}
				}
				if !found {
					b, _ := json.Marshal(rv)
					*errs = append(*errs, fmt.Sprintf("Unknown value `%s' for key `%s'", b, kpath))
				}
				continue
			}
			if m, ok := so["$map"]; isObj && ok {
				entries, ok := rv.(map[string]any)
				if !ok {
					*errs = append(*errs, fmt.Sprintf("Expected an object as the value for key `%s'", kpath))
					continue
				}
				if _, ok := m.(map[string]any); !ok {
					continue // a "$map" of a non-object permits any object
				}
				names := make([]string, 0, len(entries))
				for k := range entries {
					names = append(names, k)
				}
				sort.Strings(names)
				for _, name := range names {
					vpath := kpath + "[" + name + "]"
					if _, ok := entries[name].(map[string]any); !ok {
						*errs = append(*errs, fmt.Sprintf("Expected an object for `%s'", vpath))
						continue
					}
					match(m, entries[name], vpath, errs)
				}
				continue
			}
			match(sv, rv, kpath, errs)
		}
	case []any:
		s := schema.([]any)
		switch len(s) {
		case 0:
			if len(v) > 0 {
				*errs = append(*errs, fmt.Sprintf("Expected an empty array for key `%s'", path))
			}
		case 1:
			for i, item := range v {
				match(s[0], item, fmt.Sprintf("%s[%d]", path, i), errs)
			}
		default:
			// schemaMatch asserts: a schema array has zero or one item.
			*errs = append(*errs, fmt.Sprintf("schema array at `%s' has %d items", path, len(s)))
		}
	}
}
