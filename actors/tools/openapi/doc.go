// Package openapi is a tool source backed by an OpenAPI 3 document: each
// operation is a tool named by its operationId, called over real HTTP.
//
// [Load] reads the document (a file or an http(s) URL, JSON or YAML) with
// kin-openapi and builds an index from operation name to method, path
// template, parameters and request body. Lookup and Call are a map lookup
// plus the request itself, whatever the size of the document; a tool's
// input schema is built on its first lookup and cached. Search scores text
// precomputed at load.
//
// Operations without an operationId get a derived name: the method and the
// path in camelCase, with "By<Param>" for a path parameter (GET /todos/{id}
// is "getTodosById"; see Load).
//
// Approval defaults: every method other than GET, HEAD and OPTIONS requires
// approval, with approval text "<METHOD> <pathTemplate>" ("POST /todos").
// GET, HEAD and OPTIONS are Idempotent.
//
// Arguments: code passes one object. Parameters take the key of their name;
// the request body is args.body or, for an operation whose body is an
// object, the remaining keys, so tools.demo.createTodo({title: "x"}) sends
// {"title":"x"}. The input schema shows the same shape: parameters and the
// body's fields side by side, or a "body" property when the body is not an
// object or a field name collides with a parameter.
//
// Responses: 2xx JSON is decoded, other text returned as a string, an empty
// body as nil. A non-2xx status is an [*HTTPError] whose message carries the
// status, the method and path template and up to 2 KB of the body.
//
// OpenAPI 3.1: kin-openapi v0.153 loads 3.1 documents (type arrays,
// nullable through "null", const, $defs, exclusiveMinimum as a number,
// webhooks), and indexing and calls work the same. Schemas are passed to the
// input schema as kin-openapi marshals them; 3.0 nullable and boolean
// exclusiveMinimum/Maximum are rewritten to their JSON Schema forms. $refs
// into a schema's own $defs or by $id are left as they are.
package openapi
