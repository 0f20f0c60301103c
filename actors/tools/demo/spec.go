package demo

import "encoding/json"

// Spec returns the API's OpenAPI 3.0 document as JSON, with servers[0].url
// set to baseURL (e.g. the httptest server's URL, no trailing slash).
func (a *API) Spec(baseURL string) []byte {
	ref := func(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }
	jsonContent := func(schema any) map[string]any {
		return map[string]any{"application/json": map[string]any{"schema": schema}}
	}
	errResp := func(desc string) map[string]any {
		return map[string]any{"description": desc, "content": jsonContent(ref("Error"))}
	}
	idParam := map[string]any{
		"name": "id", "in": "path", "required": true,
		"description": "The to-do's id.",
		"schema":      map[string]any{"type": "string"},
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":       "mcpgrain demo to-do API",
			"version":     "1.0.0",
			"description": "An in-memory to-do list served by mcpgrain dev.",
		},
		"servers": []any{map[string]any{"url": baseURL}},
		"paths": map[string]any{
			"/todos": map[string]any{
				"get": map[string]any{
					"operationId": "listTodos",
					"summary":     "List to-dos",
					"description": "Returns the to-dos in creation order, optionally only those done or not done.",
					"parameters": []any{
						map[string]any{
							"name": "done", "in": "query",
							"description": "Only to-dos with this done state.",
							"schema":      map[string]any{"type": "boolean"},
						},
						map[string]any{
							"name": "limit", "in": "query",
							"description": "At most this many to-dos (default 100).",
							"schema":      map[string]any{"type": "integer", "minimum": 1, "maximum": 100},
						},
					},
					"responses": map[string]any{
						"200": map[string]any{
							"description": "The to-dos.",
							"content":     jsonContent(map[string]any{"type": "array", "items": ref("Todo")}),
						},
						"400": errResp("Invalid query."),
					},
				},
				"post": map[string]any{
					"operationId": "createTodo",
					"summary":     "Create a to-do",
					"description": "Adds a to-do that is not done yet and returns it.",
					"requestBody": map[string]any{
						"required": true,
						"content":  jsonContent(ref("NewTodo")),
					},
					"responses": map[string]any{
						"201": map[string]any{"description": "The new to-do.", "content": jsonContent(ref("Todo"))},
						"400": errResp("Invalid to-do."),
					},
				},
			},
			"/todos/{id}": map[string]any{
				"parameters": []any{idParam},
				"get": map[string]any{
					"operationId": "getTodo",
					"summary":     "Get a to-do",
					"responses": map[string]any{
						"200": map[string]any{"description": "The to-do.", "content": jsonContent(ref("Todo"))},
						"404": errResp("No such to-do."),
					},
				},
				"delete": map[string]any{
					"operationId": "deleteTodo",
					"summary":     "Delete a to-do",
					"responses": map[string]any{
						"204": map[string]any{"description": "Deleted."},
						"404": errResp("No such to-do."),
					},
				},
			},
		},
		"components": map[string]any{
			"schemas": map[string]any{
				"Todo": map[string]any{
					"type":     "object",
					"required": []string{"id", "title", "done", "createdAt"},
					"properties": map[string]any{
						"id":        map[string]any{"type": "string"},
						"title":     map[string]any{"type": "string"},
						"done":      map[string]any{"type": "boolean"},
						"createdAt": map[string]any{"type": "string", "format": "date-time"},
					},
				},
				"NewTodo": map[string]any{
					"type":                 "object",
					"required":             []string{"title"},
					"additionalProperties": false,
					"properties": map[string]any{
						"title": map[string]any{
							"type": "string", "minLength": 1, "maxLength": MaxTitleLen,
							"description": "What to do.",
						},
					},
				},
				"Error": map[string]any{
					"type":       "object",
					"required":   []string{"error"},
					"properties": map[string]any{"error": map[string]any{"type": "string"}},
				},
			},
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic("demo: marshal spec: " + err.Error()) // static data; cannot happen
	}
	return b
}
